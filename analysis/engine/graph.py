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
from model.positions import attention_terms

MEMO_ENTRIES = 4  # outputs run(memo=) keeps: the circuit search's next variants mostly share one of its last few


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
        layers: list[int] = []  # each edge's receiver's layer; the logits' is n_layers
        for layer in range(self.n_layers):
            heads = [head_label(layer, h) for h in range(self.n_heads)]
            for h, head in enumerate(heads):
                inputs = ("q", "k", "v") if h % self.group == 0 else ("q",)
                edges += [Edge(s, head, i) for i in inputs for s in self.senders]
            edges += [Edge(s, f"mlp{layer}", "in") for s in [*self.senders, *heads]]
            self.senders += [*heads, f"mlp{layer}"]
            layers += [layer] * (len(edges) - len(layers))
        edges += [Edge(s, "logits", "in") for s in self.senders]
        layers += [self.n_layers] * (len(edges) - len(layers))
        self.edges = edges
        self._receiver_layers = torch.tensor(layers)  # (n_edges,)
        self.index = {e: i for i, e in enumerate(edges)}
        self._tables: dict[tuple, torch.Tensor] = {}  # _edge_table's, built once per receiver group

    def __len__(self) -> int:
        return len(self.edges)

    def weights(self, keep: set[Edge] | None = None, device=None) -> torch.Tensor:
        """(n_edges,) 1.0 for the edges in ``keep`` (all when None), 0.0 for the rest."""
        if keep is None:
            return torch.ones(len(self.edges), device=device)
        return torch.tensor([float(e in keep) for e in self.edges], device=device)

    def _edge_table(self, receivers: list[tuple[str, str]], n_senders: int) -> torch.Tensor:
        """(n_receivers, n_senders) edge indices: receiver r's edge from sender s."""
        key = (tuple(receivers), n_senders)
        if key not in self._tables:
            self._tables[key] = torch.tensor(
                [[self.index[Edge(s, r, i)] for s in self.senders[:n_senders]] for r, i in receivers], dtype=torch.long
            )
        return self._tables[key]

    def run(
        self,
        idx: torch.Tensor,
        weights: torch.Tensor | None = None,
        reference: torch.Tensor | None = None,
        own: torch.Tensor | None = None,
        last_only: bool = False,
        memo: dict | None = None,
    ):
        """idx (B, T) -> (logits, every sender's output stacked (n_senders, B, T, d_model), ``senders`` order).

        weights (n_edges,) or (C, n_edges) for C variants at once: per edge, 1 = this run's sender output,
        0 = ``reference``'s (another run's sender outputs, as this returns them), in between = a mix;
        None = all 1 (the model's own forward). Logits are (B, T, vocab), or (C, B, T, vocab) for C variants.

        Shortcuts for patching, where each variant changes a few edges and the metric reads one position; none
        changes a number (tests/test_circuits.py holds them to the whole graph), and all but last_only work without
        gradients only (with them, every weight needs its own path):
        own, this run's sender outputs unpatched (as ``run(idx)`` returns them): the layers before the first one
        whose receivers a weight below 1 reaches are the same in every variant, taken from ``own`` and not run
        again, and in that layer the heads with no such edge write their own output. last_only: logits at the last
        position alone, ((C,) B, 1, vocab) -- causal attention lets no later position matter, so the last layer
        computes its queries, attention and MLP there only; the sender outputs are then not returned (None).
        memo: a dict this fills with each variant's outputs of the layers below each layer, by the weights of the
        edges into them, and takes them from when every variant's are there (a search whose variants mostly share
        their first layers' edges, as the circuit search's do, computes those layers once); :data:`MEMO_ENTRIES`
        kept, the latest used. And the receivers of a variant that weigh every sender alike share one read."""
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
        # each read, since autograd keeps what each read saw. With last_only the last layer's senders fill their
        # last position alone.
        changes = None if torch.is_grad_enabled() else x.new_empty(len(self.senders), C, B, T, x.shape[-1])
        deltas: list[torch.Tensor] = []  # with gradients: each sender's change, (C, B, T, d)
        first: list[torch.Tensor] = []  # each sender's output in the first variant, returned
        bias = 0.0  # the attention output biases written so far: the same in every run, so no edge carries them
        last = slice(-1, None)  # the position last_only computes
        scores, scale = attention_terms(net, T, T, None, idx.device)  # what the position schemes add, per layer
        if last_only:
            last_scores, last_scale = attention_terms(net, 1, T, None, idx.device)  # ... for the last query alone

        def sent(outputs: torch.Tensor, at: slice = slice(None)) -> None:
            """The next senders' outputs (n, C, B, T or 1, d) into ``changes``, at positions ``at``."""
            n, start = outputs.shape[0], len(first)
            if remember:
                raw.append(outputs)
            base = 0.0 if reference is None else reference[start : start + n, :, at].unsqueeze(1)
            if changes is None:
                deltas.extend(outputs - base)
            else:
                torch.sub(outputs, base, out=changes[start : start + n, :, :, at])
            first.extend(outputs[:, 0])

        def read(receivers: list[tuple[str, str]], at: slice = slice(None), norm=None) -> list[torch.Tensor]:
            """What each receiver reads at positions ``at``, through ``norm`` (its block's LayerNorm; None: none):
            every earlier sender's write, each edge weighted between this run (w) and the reference (1 - w).
            One (C * B, T or 1, d_model) per receiver; receivers that read the same share one tensor."""
            n, norm = len(first), norm or (lambda x: x)
            S = torch.stack([d[:, :, at] for d in deltas]) if changes is None else changes[:n, :, :, at]
            # the reference run's stream before sender n, (B, T or 1, d): what a receiver reads with weights 0
            base = (0.0 if reference is None else reference[:n, :, at].sum(0)) + bias
            if w is None:  # every receiver reads the whole run
                return [norm(S.sum(0) + base).flatten(0, 1)] * len(receivers)
            W = w[:, self._edge_table(receivers, n).to(w.device)]  # (C, n_r, n_s)
            if changes is None:  # with gradients: each receiver its own read, so each weight's gradient is its own
                total = torch.einsum("crs,scbtd->rcbtd", W, S)  # (n_r, C, B, T, d)
                return list(norm(total + base).flatten(1, 2))
            reads = []  # per variant, per receiver
            for c in range(C):  # the receivers of a variant that weigh every sender alike share one read
                mixes, which = torch.unique(W[c], dim=0, return_inverse=True)  # (U, n_s), (n_r,)
                streams = norm(torch.einsum("us,sbtd->ubtd", mixes, S[:, c]).add_(base))
                reads.append([streams[u] for u in which.tolist()])  # views: no copy per receiver
            return reads[0] if C == 1 else [torch.cat(one) for one in zip(*reads, strict=True)]

        begin, known = 0, None  # the first layer computed; the outputs of the senders before it, every variant's
        from_own = None
        if own is not None and changes is not None and w is not None:
            begin = self._first_reached(w)
            known = own[: self._senders_below(begin)].unsqueeze(1).expand(-1, C, B, T, x.shape[-1])
            from_own = begin  # the layer whose inputs are all the clean run's, if any: its unchanged heads are too
        remember = memo is not None and changes is not None and w is not None
        raw: list[torch.Tensor] = []  # with a memo: the senders' outputs as sent, (n, C, B, T, d) each
        if remember:
            for layer in range(self.n_layers - 1, begin, -1):  # the deepest layer below which every variant is known
                keys = [self._prefix_key(row, layer) for row in w]
                if all(key in memo for key in keys):
                    for key in keys:  # the latest used last: the first to go is the one used longest ago
                        memo[key] = memo.pop(key)
                    begin, known, from_own = layer, torch.stack([memo[key] for key in keys], 1), None
                    break
        if begin == 0:
            sent(x.expand(1, C, B, T, x.shape[-1]))
        else:  # the embedding and layers before ``begin``, as another pass computed them
            sent(known)
            for block in net.blocks[:begin]:
                if block.attn.W_o.bias is not None:
                    bias = bias + block.attn.W_o.bias
        for layer, block in enumerate(net.blocks):
            if layer < begin:
                continue
            attn, H = block.attn, block.attn.n_heads
            # the heads to compute: in the first layer after the clean run's, those with a changed edge (the others
            # write their clean output); every head from there on
            todo = self._changed_heads(w, layer) if layer == from_own else list(range(H))
            at = last if last_only and layer == self.n_layers - 1 else slice(None)  # where this layer computes
            terms = (last_scores[layer], last_scale) if at == last else (scores[layer], scale)
            writes = self._attend(block, layer, todo, read, at, terms, (C, B))
            if len(todo) < H:  # the others' clean outputs around them
                first_head = self._senders_below(layer)
                clean = own[first_head : first_head + H, :, at].unsqueeze(1).expand(-1, C, -1, -1, -1)
                writes = clean if writes is None else clean.clone().index_copy_(0, self._ids(todo, idx), writes)
            sent(writes, at)
            if attn.W_o.bias is not None:
                bias = bias + attn.W_o.bias
            mlp_out = block.mlp(read([(f"mlp{layer}", "in")], at, block.ln_mlp)[0])  # (C*B, T_q, d)
            sent(mlp_out.unflatten(0, (C, B)).unsqueeze(0), at)
            if remember and layer + 1 < self.n_layers:  # each variant's outputs below the next layer
                for c, row in enumerate(w):
                    memo[self._prefix_key(row, layer + 1)] = torch.cat([outputs[:, c] for outputs in raw])
                while len(memo) > MEMO_ENTRIES:
                    memo.pop(next(iter(memo)))
        logits = net.unembed(read([("logits", "in")], last if last_only else slice(None))[0]).unflatten(0, (C, B))
        return (logits if variants else logits[0]), (None if last_only else torch.stack(first))

    def _senders_below(self, layer: int) -> int:
        """How many senders write before ``layer``: the embedding, and each earlier layer's heads and MLP."""
        return 1 + layer * (self.n_heads + 1)

    def _prefix_key(self, row: torch.Tensor, layer: int) -> tuple[int, bytes]:
        """A memo's key for one variant's layers below ``layer``: the weights (n_edges,) of the edges into them."""
        return layer, row[self._receiver_layers.to(row.device) < layer].cpu().numpy().tobytes()

    def _first_reached(self, w: torch.Tensor) -> int:
        """The first layer whose receivers a weight below 1 reaches in any row of ``w`` (C, n_edges) (n_layers:
        only the logits'; also when none does, the model's own run)."""
        reached = self._receiver_layers.to(w.device)[(w != 1).any(0)]
        return int(reached.min()) if len(reached) else self.n_layers

    def _attend(self, block, layer: int, todo: list[int], read, at: slice, terms: tuple, variants: tuple[int, int]):
        """The writes (n_todo, C, B, T_q, d) of the heads ``todo`` of ``block`` (None for none): each one's query,
        key and value read their own streams (``read``), queries at positions ``at`` (keys at every one), with the
        position schemes' ``terms`` (score bias, query scale) for those queries; ``variants``: (C, B)."""
        if not todo:
            return None
        attn = block.attn
        H, hd = attn.n_heads, attn.head_dim
        groups = sorted({h // self.group for h in todo})  # their key/value heads
        queries = [(head_label(layer, h), "q") for h in todo]
        keys_values = [(self._kv_name(layer, g * self.group), i) for i in "kv" for g in groups]
        if at != slice(None):  # queries at the last position, keys and values at every one
            q_streams, kv_streams = read(queries, at, block.ln_attn), read(keys_values, norm=block.ln_attn)
        else:
            streams = read(queries + keys_values, norm=block.ln_attn)
            q_streams, kv_streams = streams[: len(todo)], streams[len(todo) :]
        layer_scores, layer_scale = terms
        group_of = self._ids([groups.index(h // self.group) for h in todo], q_streams[0])
        q = self._project(attn.W_q, q_streams, todo, hd)  # (C*B, n_todo, T_q, hd)
        k = self._project(attn.W_k, kv_streams[: len(groups)], groups, hd).index_select(1, group_of)
        v = self._project(attn.W_v, kv_streams[len(groups) :], groups, hd).index_select(1, group_of)
        if layer_scale is not None:
            q = q * layer_scale.to(q.dtype)
        if layer_scores is not None:
            layer_scores = layer_scores[:, todo]
        z = attn.fused_attention(q, k, v, True, None, layer_scores)  # (C*B, n_todo, T_q, hd): no weights kept
        W_o = attn.W_o.weight.view(attn.d_model, H, hd)[:, todo]
        return torch.einsum("nhte,dhe->hntd", z, W_o).unflatten(1, variants)  # head h's write, (C, B, T_q, d)

    @staticmethod
    def _ids(indices: list[int], like: torch.Tensor) -> torch.Tensor:
        return torch.tensor(indices, dtype=torch.long, device=like.device)

    def _kv_name(self, layer: int, head: int) -> str:
        """The name of the key/value receivers ``head`` reads: its group's first head's (grouped queries)."""
        return head_label(layer, head - head % self.group)

    def _changed_heads(self, w: torch.Tensor, layer: int) -> list[int]:
        """The heads of ``layer`` whose query, key or value reads an edge weighted below 1 in some variant."""
        reads = [
            [(head_label(layer, h), "q"), (self._kv_name(layer, h), "k"), (self._kv_name(layer, h), "v")]
            for h in range(self.n_heads)
        ]
        n = self._senders_below(layer)
        return [h for h, r in enumerate(reads) if bool((w[:, self._edge_table(r, n).to(w.device)] != 1).any())]

    @staticmethod
    def _project(linear, streams: list[torch.Tensor], heads: list[int], hd: int) -> torch.Tensor:
        """Each head's own stream (N, T, d_model), one per head of ``heads``, through its rows of W_q, W_k or W_v
        -> (N, n_heads, T, head_dim)."""
        weight = linear.weight.view(-1, hd, linear.weight.shape[-1])[heads]  # (n, hd, d)
        out = torch.stack([stream @ w.T for stream, w in zip(streams, weight, strict=True)], 1)
        return out if linear.bias is None else out + linear.bias.view(-1, 1, hd)[heads]
