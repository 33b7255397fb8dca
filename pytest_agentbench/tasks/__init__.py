"""Taskpacks on disk: finding `taskpacks/<suite>/<task>/task.yaml`, loading it into a TaskSpec,
and one clear line per problem when it is wrong.

May import: schemas, and the ground floor (paths, text, version).
"""
