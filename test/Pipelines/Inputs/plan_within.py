"""Fails unless the memory plan in argv[1] peaks within argv[2] MiB."""
import re
import sys

text = open(sys.argv[1]).read()
peak = int(re.search(r"train.timeline_peak_bytes = (\d+)", text).group(1))
limit = float(sys.argv[2]) * 2**20
print(f"plan peak {peak} bytes, limit {int(limit)}")
sys.exit(0 if peak <= limit else 1)
