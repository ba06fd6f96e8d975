"""The ``idempotent-pipeline`` command line: ``init``, ``local ...`` and the other tools of the project.

``python -m idempotent_cli`` is the same command. See :mod:`idempotent_cli.main`.
"""
