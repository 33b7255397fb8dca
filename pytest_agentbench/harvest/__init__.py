"""Harvest: tasks from a repository's own history."""
