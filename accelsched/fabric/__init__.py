"""The fabric between nodes: topology levels (Kueue's Topology, NVLink cliques), what a gang asks of them, and
where its pods go (Kueue's Topology Aware Scheduling, BestFit), ranks in order."""
