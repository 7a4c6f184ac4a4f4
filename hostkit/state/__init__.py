"""Host-side state: the change journal (history) and exact rollback. Standard library only:
this package ships to hosts inside the runtime zipapp."""
