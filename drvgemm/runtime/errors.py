"""The two exception types drvgemm raises on its own account.

Argument mistakes are plain TypeError / ValueError raised before anything
reaches the GPU; these two are for what the toolchain or the driver says.
"""


class CompileError(RuntimeError):
    """NVRTC or nvJitLink refused a kernel. ``log`` holds the compiler's log
    (file:line: error ...), ``source`` the file or name that was compiled."""

    def __init__(self, message, log="", source=None):
        self.log = log
        self.source = source
        text = message
        if log:
            text += "\n--- compiler log ---\n" + log.rstrip()
        super().__init__(text)
        self._args = (message, log, source)

    def __reduce__(self):      # picklable: drvgemm.isolated() sends errors between processes
        return (type(self), self._args)


class CudaError(RuntimeError):
    """A CUDA driver call failed. Carries the CUresult name and number, the
    driver's own description, the call that failed and, where one helps, a
    hint about the usual cause."""

    def __init__(self, call, code, name, description, hint=None):
        self.call = call
        self.code = int(code)
        self.name = name
        self.description = description
        self.hint = hint
        text = f"{call} failed: {name} ({self.code}): {description}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)

    def __reduce__(self):      # picklable: drvgemm.isolated() sends errors between processes
        return (type(self), (self.call, self.code, self.name, self.description, self.hint))


class NoDeviceError(CudaError):
    """No CUDA driver library or no device: the reason GPU work is skipped."""


class StaleObjectError(RuntimeError):
    """A DeviceArray, Stream, Event or graph made before ``drvgemm.reset()``
    was used: its memory or handle went with the old CUDA context."""
