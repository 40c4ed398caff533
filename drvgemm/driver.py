def default_arch():
    return "sm_90"
