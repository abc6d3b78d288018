"""The network as a graph of components and edges, for path patching and circuits (ACDC / EAP's view).

Every component writes into the residual stream, so what any component reads is a sum of what earlier ones wrote:

    senders    embed (token + position tables), every head (its z @ W_o slice), every MLP
    receivers  each head's query, key and value input (its own copy of the stream), each MLP's input, the logits
    edge       sender -> receiver: the sender's write as that one receiver reads it

``run`` computes the model edge by edge: each receiver reads, per edge, the sender's output in this run (weight 1)
or in a reference run (weight 0), so one edge can be patched or ablated and the change flows on from there.
With every weight 1 it is the model's own forward pass (a test holds it to ``net(idx)``); the weights are a
tensor, so their gradient is edge attribution patching (EAP) in one backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.hooks import head_label


@dataclass(frozen=True)
class Edge:
    sender: str  # "embed", "L0h2", "mlp0"
    receiver: str  # "L1h3", "mlp1", "logits"
    input: str  # "q", "k", "v" (a head's), "in" (an MLP's or the logits')

    @property
    def head_to_head(self) -> bool:
        return self.sender[0] == "L" and self.receiver[0] == "L"


class ComponentGraph:
    """Senders, receivers and edges of ``net`` (a :class:`model.transformer.Transformer`), and a forward pass
    through them. Grouped-query models have one key/value receiver per key/value head (named by its first head)."""

    def __init__(self, net):
        self.net, cfg = net, net.cfg
        self.n_layers, self.n_heads = cfg.n_layers, cfg.n_heads
        self.group = cfg.n_heads // (cfg.n_kv_heads or cfg.n_heads)
        self.senders = ["embed"]
        edges: list[Edge] = []
        for layer in range(self.n_layers):
            heads = [head_label(layer, h) for h in range(self.n_heads)]
            for h, head in enumerate(heads):
                inputs = ("q", "k", "v") if h % self.group == 0 else ("q",)
                edges += [Edge(s, head, i) for i in inputs for s in self.senders]
            edges += [Edge(s, f"mlp{layer}", "in") for s in [*self.senders, *heads]]
            self.senders += [*heads, f"mlp{layer}"]
        edges += [Edge(s, "logits", "in") for s in self.senders]
        self.edges = edges
        self.index = {e: i for i, e in enumerate(edges)}
        self._tables: dict[tuple, torch.Tensor] = {}  # _edge_table's, built once per receiver group

    def __len__(self) -> int:
        return len(self.edges)

    def weights(self, keep: set[Edge] | None = None, device=None) -> torch.Tensor:
        """(n_edges,) 1.0 for the edges in ``keep`` (all when None), 0.0 for the rest."""
        if keep is None:
            return torch.ones(len(self.edges), device=device)
        return torch.tensor([float(e in keep) for e in self.edges], device=device)

    def read_bytes(self, idx: torch.Tensor) -> int:
        """The bytes of the largest read one variant of :meth:`run` makes on ``idx`` (B, T): every head's query,
        key and value receivers at once, (n_receivers, B, T, d_model) floats."""
        receivers = self.n_heads + 2 * (self.n_heads // self.group)
        return receivers * idx.numel() * self.net.cfg.d_model * 4

    def _edge_table(self, receivers: list[tuple[str, str]], n_senders: int) -> torch.Tensor:
        """(n_receivers, n_senders) edge indices: receiver r's edge from sender s."""
        key = (tuple(receivers), n_senders)
        if key not in self._tables:
            self._tables[key] = torch.tensor(
                [[self.index[Edge(s, r, i)] for s in self.senders[:n_senders]] for r, i in receivers], dtype=torch.long
            )
        return self._tables[key]

    def run(self, idx: torch.Tensor, weights: torch.Tensor | None = None, reference: torch.Tensor | None = None):
        """idx (B, T) -> (logits, every sender's output stacked (n_senders, B, T, d_model), ``senders`` order).

        weights (n_edges,) or (C, n_edges) for C variants at once: per edge, 1 = this run's sender output,
        0 = ``reference``'s (another run's sender outputs, as this returns them), in between = a mix;
        None = all 1 (the model's own forward). Logits are (B, T, vocab), or (C, B, T, vocab) for C variants."""
        net = self.net
        if net.training:
            raise ValueError("the component graph runs a model in eval mode (no dropout)")
        if weights is not None and reference is None:
            raise ValueError("edge weights need a reference run to take the other part from")
        variants = weights is not None and weights.dim() == 2
        w = None if weights is None else weights.reshape(-1, len(self.edges))  # (C, n_edges)
        C = 1 if w is None else w.shape[0]
        B, T = idx.shape
        x = net.embed(idx)
        # every sender's output as it differs from the reference's, (n_senders, C, B, T, d_model), each subtracted
        # once as the senders run. Without gradients it fills one buffer whose prefix a receiver reads without a
        # copy (the circuit search's hundreds of passes allocate little); with gradients it is a list stacked at
        # each read, since autograd keeps what each read saw.
        changes = None if torch.is_grad_enabled() else x.new_empty(len(self.senders), C, B, T, x.shape[-1])
        deltas: list[torch.Tensor] = []  # with gradients: each sender's change, (C, B, T, d)
        first: list[torch.Tensor] = []  # each sender's output in the first variant, returned
        bias = 0.0  # the attention output biases written so far: the same in every run, so no edge carries them
        scores, scale = net.attention_terms(T, T, None, idx.device)  # what the position schemes add, per layer

        def sent(outputs: torch.Tensor) -> None:
            """The next senders' outputs (n, C, B, T, d) into ``changes``."""
            n, start = outputs.shape[0], len(first)
            base = 0.0 if reference is None else reference[start : start + n].unsqueeze(1)
            if changes is None:
                deltas.extend(outputs - base)
            else:
                torch.sub(outputs, base, out=changes[start : start + n])
            first.extend(outputs[:, 0])

        def read(receivers: list[tuple[str, str]]) -> torch.Tensor:
            """What each receiver reads: every earlier sender's write, each edge weighted between this run (w)
            and the reference (1 - w). (n_receivers, C * B, T, d_model)."""
            S = torch.stack(deltas) if changes is None else changes[: len(first)]  # (n_s, C, B, T, d)
            if w is None:
                return (S.sum(0).expand(len(receivers), *S.shape[1:])).flatten(1, 2) + bias
            W = w[:, self._edge_table(receivers, len(first)).to(w.device)]  # (C, n_r, n_s)
            total = torch.einsum("crs,scbtd->rcbtd", W, S)  # (n_r, C, B, T, d)
            if changes is None:  # autograd keeps the einsum's output: new sums
                return (total + reference[: len(first)].sum(0)).flatten(1, 2) + bias
            return total.add_(reference[: len(first)].sum(0)).flatten(1, 2).add_(bias)  # in place: no new arrays

        sent(x.expand(1, C, B, T, x.shape[-1]))
        for layer, block in enumerate(net.blocks):
            attn = block.attn
            H, G, hd = attn.n_heads, attn.n_kv_heads, attn.head_dim
            heads = [head_label(layer, h) for h in range(H)]
            kv_heads = heads[:: self.group]
            streams = block.ln_attn(read([(h, "q") for h in heads] + [(h, i) for i in "kv" for h in kv_heads]))
            q = self._project(attn.W_q, streams[:H], H, hd)  # (C*B, H, T, hd)
            k = self._project(attn.W_k, streams[H : H + G], G, hd).repeat_interleave(self.group, dim=1)
            v = self._project(attn.W_v, streams[H + G :], G, hd).repeat_interleave(self.group, dim=1)
            if scale is not None:
                q = q * scale.to(q.dtype)
            z = attn.attention_weights(q, k, attn.allowed(T, T, True, None), scores[layer]) @ v  # (C*B, H, T, hd)
            writes = torch.einsum("nhte,dhe->hntd", z, attn.W_o.weight.view(attn.d_model, H, hd))
            sent(writes.unflatten(1, (C, B)))  # head h's write, (C, B, T, d)
            if attn.W_o.bias is not None:
                bias = bias + attn.W_o.bias
            sent(block.mlp(block.ln_mlp(read([(f"mlp{layer}", "in")])[0])).unflatten(0, (C, B)).unsqueeze(0))
        logits = net.unembed(read([("logits", "in")])[0]).unflatten(0, (C, B))
        return (logits if variants else logits[0]), torch.stack(first)

    @staticmethod
    def _project(linear, streams: torch.Tensor, n: int, hd: int) -> torch.Tensor:
        """Each head's own stream (n, N, T, d_model) through its rows of W_q, W_k or W_v -> (N, n, T, head_dim)."""
        out = torch.einsum("hntd,hed->nhte", streams, linear.weight.view(n, hd, -1))
        return out if linear.bias is None else out + linear.bias.view(n, 1, hd)
