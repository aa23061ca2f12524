"""The admin of the job queue: the job list and the zombie list (``job_list``), with their filters and
display helpers, and what runs the queue (``runtime``: processes, schedules).

Admin autodiscovery imports this package, which imports the modules that register.
"""

from . import job_list, runtime  # noqa: F401  (register their ModelAdmins)
