"""MTEB tasks that work offline: tasks built from local rows or folders (``local_tasks``), the shared
STS sets and the bundled demo registered with mteb (``shared_tasks``), and task names as a user
writes them resolved to task classes (``task_names``)."""
