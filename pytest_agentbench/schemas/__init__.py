"""The data layer: pydantic models of what is read and written: the task spec (task.yaml), the
attempt record, the event union and the failure taxonomy.

Imports only pydantic and the standard library.
"""
