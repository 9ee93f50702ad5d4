"""Code that runs inside the scheduler and workers: plugins, snapshots, shipping."""
