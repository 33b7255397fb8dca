"""Built-in agents. Third-party agents register through hookspecs or the entry-point group."""
