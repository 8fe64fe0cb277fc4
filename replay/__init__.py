"""On-host replay on real cgroups, set beside the simulator's prediction (the [replay] issue)."""
