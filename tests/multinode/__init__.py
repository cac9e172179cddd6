"""Two simulated nodes on one machine (marked `multinode`): docs/multinode.md."""
