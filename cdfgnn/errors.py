"""Errors raised for bad input. The CLI turns them into a message and exit code 2."""


class CdfgnnError(ValueError):
    """Bad input: the message names the input and what was expected."""


class CorruptFileError(CdfgnnError):
    """A file on disk is truncated, unreadable or violates the format's invariants."""


class DatasetUnavailableError(CdfgnnError):
    """A real dataset is not on disk and cannot be downloaded (e.g. offline)."""


class WorkerFailedError(RuntimeError):
    """A simulated or real worker died or timed out; the whole run is stopped."""


class CollectiveAbortedError(WorkerFailedError):
    """A collective could not complete because *another* rank failed or hung.

    A secondary failure: launchers report the root cause (the first failure)
    instead. The process backend raises it too when torch.distributed fails.
    """


class CollectiveTimeoutError(WorkerFailedError):
    """A rank did not reach a collective within the group's timeout."""


class PeerLostError(WorkerFailedError):
    """A multi-host run lost a peer rank or host: no heartbeat within the limit (its host
    went down, its link dropped or its process died). The message names them."""
