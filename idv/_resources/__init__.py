"""What a read may use: the memory budget, the block cache, the thread pools, the garbage collector
paused over many files."""
