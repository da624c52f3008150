"""Sensing: the sensors and probes a beat runs, the world they make, and the seal that lets
the next beat prove from stats and digests that nothing changed."""
