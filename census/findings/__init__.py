"""What one capture says beyond its figures, pure on its columns: its kernels by operation
(ops.py)."""
