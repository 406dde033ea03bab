"""sources stage: what the user names, made a read-only nsys export: a report exported
(export.py), an nsys Arrow/Parquet folder made one (columnar.py), a bundled sample (samples.py), a
rank folder (ranks.py), opened read-only (readonly.py) and its tables known (schema.py); a
`census ab` folder read back (experiment.py); and a PyTorch profiler (Kineto) trace streamed into
int64 columns (kineto/)."""
