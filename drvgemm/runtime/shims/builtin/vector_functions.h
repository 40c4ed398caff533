// Declared by NVRTC itself: see README beside this file.
