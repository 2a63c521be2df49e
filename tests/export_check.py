"""export_check.py EXPORT_DIR TOKENS XTRAP_SCORES: the reference module's scores on TOKENS must equal
xtrap's (float32 (T, V) file written by tests/tools/export_logits) within 1e-4; prints the max difference.
Where the `safetensors` package is installed (not on Debian 12; the GPU machine's Python has it), it
must load model.safetensors too, with the same names, dtypes, shapes and bytes as the reference's reader."""
import os, sys
import torch

sys.dont_write_bytecode = True  # no tests/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xtrap_reference import load, load_safetensors

model, vocab = load(sys.argv[1])
try:
    from safetensors.torch import load_file
except ImportError:
    load_file = None
if load_file is not None:
    theirs_tensors = load_file(f"{sys.argv[1]}/model.safetensors")
    ours_tensors = load_safetensors(f"{sys.argv[1]}/model.safetensors")
    assert theirs_tensors.keys() == ours_tensors.keys(), "safetensors package sees other tensor names"
    for name, t in theirs_tensors.items():
        assert t.dtype == ours_tensors[name].dtype and torch.equal(t, ours_tensors[name]), name
    print(f"{os.path.basename(sys.argv[1])}: the safetensors package loads {len(theirs_tensors)} identical tensors")
tokens = torch.tensor([[int(t) for t in open(sys.argv[2]).read().split()]])
with torch.no_grad():
    ours = model(tokens)[0]
theirs = torch.frombuffer(bytearray(open(sys.argv[3], "rb").read()), dtype=torch.float32).view(ours.shape)
assert len(vocab) == ours.shape[1], f"vocab.txt has {len(vocab)} words, the model scores {ours.shape[1]}"
diff = (ours - theirs).abs().max().item()
print(f"{os.path.basename(sys.argv[1])}: max |reference - xtrap| = {diff:.3g}")
sys.exit(0 if diff <= 1e-4 else 1)
