"""nanoGPT (a copy whose Block.forward logs and prints, as a user debugging it would), compiled from the
top-level GPT module, called twice: stdout and the log records, in order. ``python nanogpt_messages.py DIR BACKEND``."""
import logging
import sys

import torch

sys.path.insert(0, sys.argv[1])
from model import GPT, GPTConfig  # noqa: E402

logging.basicConfig(stream=sys.stdout, format="LOG %(levelname)s %(name)s: %(message)s")
torch.manual_seed(0)
model = GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0)).eval()
compiled = torch.compile(model, backend=sys.argv[2] if len(sys.argv) > 2 else "inductor")
ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    for call in range(2):
        print(f"call {call}")
        logits, _ = compiled(ids)
        print(f"call {call} done, logits {tuple(logits.shape)}")
