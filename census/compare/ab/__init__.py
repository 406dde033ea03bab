"""The A/B arms' statistics: stats.py (arms -> verdict), sequential.py and auto_arms.py
(`--arms auto`'s looks), disturbed.py (disturbed arms), arm_findings.py (tails and parity of
the arms), rank_table.py (an experiment's ranks over its arms), experiment.py (verdict + census
diff -> sentences)."""
