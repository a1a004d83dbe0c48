"""What every part of the running controller shares: the pod store, the work queue, leader election,
Events and metrics."""
