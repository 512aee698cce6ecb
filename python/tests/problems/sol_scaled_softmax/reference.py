import torch

@torch.no_grad()
def run(scores, scale):
    z = (scores * scale).to(torch.bfloat16)     # the reference stores the scaled logits in bf16
    z = z.to(torch.float32)
    z = z - z.max(dim=-1, keepdim=True).values
    e = torch.exp(z)
    return e / e.sum(dim=-1, keepdim=True)
