"""What a run leaves on disk: the run directory and the sweep directory, their layout and their state."""
