"""export_check.py EXPORT_DIR TOKENS XTRAP_SCORES: the reference module's scores on TOKENS must equal
xtrap's (float32 (T, V) file written by tests/tools/export_logits) within 1e-4; prints the max difference."""
import os, sys
import torch

sys.dont_write_bytecode = True  # no tests/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xtrap_reference import load

model, vocab = load(sys.argv[1])
tokens = torch.tensor([[int(t) for t in open(sys.argv[2]).read().split()]])
with torch.no_grad():
    ours = model(tokens)[0]
theirs = torch.frombuffer(bytearray(open(sys.argv[3], "rb").read()), dtype=torch.float32).view(ours.shape)
assert len(vocab) == ours.shape[1], f"vocab.txt has {len(vocab)} words, the model scores {ours.shape[1]}"
diff = (ours - theirs).abs().max().item()
print(f"{os.path.basename(sys.argv[1])}: max |reference - xtrap| = {diff:.3g}")
sys.exit(0 if diff <= 1e-4 else 1)
