"""moe_router_combine in PyTorch, for parity's file-based flow:
    parity gen moe_router_combine --workload bf16-ties --out in.safetensors
    python moe_router_combine.py in.safetensors out.safetensors --variant stable
    parity compare moe_router_combine in.safetensors out.safetensors
k and renorm come from the file's metadata (parity.attr.k, parity.attr.renorm). Variants:
  stable  fp32 softmax, top-k by a stable descending sort (equal probabilities: lower expert id,
          parity's tie rule), renormalisation and combine in fp32: faithful
  topk    the same with torch.topk, whose order among tied values is implementation-defined: fails
          on tokens with an exact tie at the top-k boundary where it picks the higher id
"""
import argparse

from st_io import load, require, save  # safetensors files without the safetensors package

torch = require("torch")  # a clear message naming what is missing when it cannot be imported


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs")
    ap.add_argument("outputs")
    ap.add_argument("--variant", choices=["stable", "topk"], default="stable")
    a = ap.parse_args()
    t, meta = load(a.inputs)
    k = int(meta["parity.attr.k"])
    renorm = meta["parity.attr.renorm"] == "1"
    x = t["router_logits"].float()  # (N, E)
    y = t["expert_out"].float()  # (N, E, D)
    p = torch.softmax(x, dim=-1)
    if a.variant == "stable":
        idx = torch.sort(p, dim=-1, descending=True, stable=True).indices[:, :k]
    else:
        idx = torch.topk(p, k, dim=-1).indices
    w = torch.gather(p, 1, idx)  # (N, k)
    if renorm:
        w = w / w.sum(-1, keepdim=True)
    gates = torch.zeros_like(p).scatter(1, idx, w)
    ysel = torch.gather(y, 1, idx[:, :, None].expand(-1, -1, y.shape[2]))  # (N, k, D)
    out = torch.einsum("nk,nkd->nd", w, ysel)
    save({"out": out, "gates": gates}, a.outputs)


if __name__ == "__main__":
    main()
