"""The built-in workload: a small transformer trained eagerly or under torch.compile."""
