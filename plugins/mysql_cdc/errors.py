"""The one marker the retry policy reads (``retry_policy.is_permanent``).

``PermanentError``: an error no retry can fix (a bad range or configuration, a gap, a missing
privilege, an event or type the capture does not understand, a follower changed outside the
pipeline). Its message says what is wrong and how to fix it. An error class says it is permanent
by deriving from it, where it is defined; nothing else has to know the class.
"""

from __future__ import annotations


class PermanentError(Exception):
    """Needs a person: retries of the task cannot fix it, so the task fails at once."""
