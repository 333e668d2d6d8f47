"""The graph's rows in index order, as integer arrays by position: made from the
columns of every row (:meth:`GraphPositions.read`), or carried from the previous
build's by what a patch changed (:meth:`GraphPositions.carried`).

A graph's node positions are in index order (entities by their creating mentions,
descriptions, relations and mentions by their chunk's position and their number in
it), which is what makes a graph grown in steps equal one built at once; so one
document added early in that order moves every position after it. Made again, the
positions cost sorts of every row and of every node id
(:meth:`~quillian.stores.snapshot.IdMap.from_bytes`), and the snapshot a sort of every
edge. Carried, they cost copies: the rows kept keep their order (the chunks they come
from keep theirs), so the rows a patch read again are merged in by binary search,
the node ids' order is moved (:meth:`~quillian.stores.snapshot.IdMap.carried`), and
the snapshot's rows are copied but for the nodes whose edges changed
(:meth:`~quillian.stores.snapshot.GraphSnapshot.carried`). A build keeps its
positions and snapshot in the process (:data:`KEPT`) for the next patch to carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from quillian.components.concurrency import in_thread
from quillian.components.graph.builder import TOPIC_WEIGHT, GraphEdges, GraphShape, graph_edges
from quillian.components.retrieval import derived
from quillian.index.artifacts import KeptInProcess
from quillian.index.distinct_texts import TextMoves
from quillian.index.tables import order_arrays
from quillian.stores.snapshot import GraphSnapshot, IdMap, distinct_order, ids_as_bytes

__all__ = [
    "KEPT",
    "Changed",
    "Columns",
    "Entities",
    "GraphPositions",
    "GraphTextIds",
]


@dataclass(frozen=True)
class GraphTextIds:
    """The text each description and each relation embeds, by position: its id in the
    tables (:func:`~quillian.types.key64` of the text; a relation without a description
    embeds its triple's words); the digest of the tables they are the texts of
    (``tables``), and where the graph was carried from the last build's, where that
    one's rows went (``moves``)."""

    descriptions: npt.NDArray[np.int64]
    relations: npt.NDArray[np.int64]
    tables: str | None = None
    moves: TextMoves | None = None


class Columns(Protocol):
    """The graph's integer columns (see :class:`~quillian.index.state_tables._Columns`):
    the descriptions' (row, chunk, seq, entity, text) and node ids, the relations'
    (row, triple, chunk, seq, subject, object, source chunk or 0, 1 where it has none,
    text embedded), the mentions' (chunk, seq, entity) and weights, the entity rows in
    index order with their node ids and literal flags."""

    @property
    def descriptions(self) -> npt.NDArray[np.int64]: ...
    @property
    def description_nodes(self) -> npt.NDArray[np.bytes_]: ...
    @property
    def relations(self) -> npt.NDArray[np.int64]: ...
    @property
    def mentions(self) -> npt.NDArray[np.int64]: ...
    @property
    def weights(self) -> npt.NDArray[np.float64]: ...
    @property
    def entities(self) -> npt.NDArray[np.int64]: ...
    @property
    def entity_nodes(self) -> npt.NDArray[np.bytes_]: ...
    @property
    def literal(self) -> npt.NDArray[np.bool_]: ...


@dataclass(frozen=True)
class Entities:
    """The entity rows in index order, their node ids and whether each is a literal."""

    rows: npt.NDArray[np.int64]
    nodes: npt.NDArray[np.bytes_]
    literal: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Changed:
    """What a patch of the tables changed: the chunk keys whose descriptions and
    mentions it wrote again (``chunks``), the triples whose relations it wrote again
    (``triples``), the entity rows it wrote again (``entities``), and those rows'
    columns as it wrote them (``rows``)."""

    chunks: npt.NDArray[np.int64]
    triples: npt.NDArray[np.int64]
    entities: npt.NDArray[np.int64]
    rows: Columns


def sorted_by(major: npt.NDArray[np.int64], minor: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """``np.lexsort((minor, major))``: where ``major`` is at least -1 and under 2**31
    and ``minor`` in ``0..2**32-1`` (chunk positions, sequence numbers), as one stable
    sort of both in one 64-bit key, about three times faster on rows that mostly come
    in order already."""
    if _packs(major, minor):
        return np.argsort(_packed(major, minor), kind="stable")
    return np.lexsort((minor, major))


def _packs(major: npt.NDArray[np.int64], minor: npt.NDArray[np.int64]) -> bool:
    return not len(major) or (
        int(major.min()) >= -1
        and int(major.max()) < 2**31 - 1
        and int(minor.min()) >= 0
        and int(minor.max()) < 2**32
    )


def _packed(major: npt.NDArray[np.int64], minor: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return ((major + 1) << 32) | minor


class _ChunkPositions:
    """Each chunk key's position among a build's chunks (-1: not one of them)."""

    def __init__(self, chunk_rows: npt.NDArray[np.int64]) -> None:
        self.rows, self.n = chunk_rows, len(chunk_rows)
        # the order by key and the keys in it, set at once (two threads may look up)
        self._ordered: tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]] | None = None

    def __call__(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Looked up once per run of equal keys: the columns hold a chunk's rows
        together, so there are 2 to 6 times fewer runs than rows. Fewer keys than the
        bits of the chunks' count are each found by a scan of the chunks (a patch's
        few); more by a binary search among the chunks sorted once, a sort that costs
        about as many scans, which every update paid where a patch looks up no more
        than a document's chunks, or none for a delete."""
        if not len(rows):
            return np.empty(0, np.int64)
        if not self.n:
            return np.full(len(rows), -1, np.int64)
        starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        heads = rows[starts]
        if self._ordered is None and len(heads) < self.n.bit_length():
            pos = np.full(len(heads), -1, np.int64)
            for i, head in enumerate(heads.tolist()):
                if len(hit := np.flatnonzero(self.rows == head)):
                    pos[i] = hit[0]
        else:
            by_row, ordered = self._sorted()
            at = np.minimum(np.searchsorted(ordered, heads), self.n - 1)
            pos = np.where(ordered[at] == heads, by_row[at], -1)
        return np.repeat(pos, np.diff(np.append(starts, len(rows))))

    def _sorted(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
        """The chunks' order by key and their keys in that order, sorted once."""
        if self._ordered is None:
            by_row = distinct_order(self.rows)
            self._ordered = by_row, self.rows[by_row]
        return self._ordered


class GraphPositions:
    """The graph's rows by position (each kept with its chunk's position), the arrays
    the snapshot and the tables' arrays are made of, and the node ids' map."""

    def __init__(
        self,
        chunk_rows: npt.NDArray[np.int64],
        entities: Entities,
        descriptions: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bytes_]],
        relations: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]],
        mentions: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]],
        node_ids: IdMap,
        whole: bool,
    ) -> None:
        """``entities``: their rows in index order, their node ids and literal flags;
        ``descriptions``: their columns in index order, their chunks' positions and
        their node ids;
        ``relations``: their columns in index order, their own chunks' positions and
        their sources' (-1: none); ``mentions``: their columns in index order, their
        chunks' positions and weights. ``whole``: every row has a chunk of the build
        (else no patch carries these)."""
        # each table's columns laid out column by column: a column read (a key looked
        # up, a position gathered: a dozen an update) reads its own bytes, not every
        # row's (at 100k passages, 0.09 against 0.48 ms a column of the relations'
        # nine; a carry keeps the layout, see _spliced)
        descriptions = (np.asfortranarray(descriptions[0]), *descriptions[1:])
        relations = (np.asfortranarray(relations[0]), *relations[1:])
        mentions = (np.asfortranarray(mentions[0]), *mentions[1:])
        self.chunk_rows, self.n_chunks = chunk_rows, len(chunk_rows)
        self.entities = entities
        entity_order, self.literal = entities.rows, entities.literal
        self.entity_order, self.n_entities = entity_order, len(entity_order)
        self.orders = order_arrays(
            chunk_rows, entity_order, descriptions[0][:, 0], relations[0][:, 0].copy()
        )
        positions = self.entity_positions = self.orders["entity_positions"]
        self.descriptions, self.description_chunk, self.description_nodes = descriptions
        self.description_entity = positions[self.descriptions[:, 3]]
        self.chunk_offset = self.n_entities + len(self.description_entity)
        self.relations, self.relation_own, self.relation_chunk = relations
        self.relation_subject = positions[self.relations[:, 4]]
        self.relation_object = positions[self.relations[:, 5]]
        self.mentions, self.mention_chunk, self.mention_weights = mentions
        self.mention_weight = self.mention_weights.astype(np.float32)
        self.mention_entity = positions[self.mentions[:, 2]]
        self.node_ids, self.whole = node_ids, whole
        # columns of the rows, not copies: each reader joins the two in one copy
        self.text_ids = GraphTextIds(self.descriptions[:, 4], self.relations[:, 8])
        #: where carried, each old description's and relation's new position (-1: gone)
        self.row_moves: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    @classmethod
    def read(
        cls, columns: Columns, chunk_ids: Sequence[str], chunk_rows: npt.NDArray[np.int64]
    ) -> GraphPositions:
        """The positions of every row of ``columns``, for the build's chunks
        ``chunk_ids`` (their keys ``chunk_rows``)."""
        chunk_pos = _ChunkPositions(chunk_rows)
        keys = columns.descriptions
        described = chunk_pos(keys[:, 1])
        description_order = sorted_by(described, keys[:, 2])
        # the ids as the columns keep them, UTF-8 bytes: none decoded and encoded again
        description_nodes = columns.description_nodes[description_order]
        node_ids = IdMap.from_bytes(
            columns.entity_nodes, description_nodes, ids_as_bytes(chunk_ids)
        )
        relations = columns.relations
        own = chunk_pos(relations[:, 2])
        relation_order = sorted_by(own, relations[:, 3])
        r = relations[relation_order]
        # a relation's source is most often its own chunk, whose position is known
        source = own[relation_order]
        elsewhere = np.flatnonzero(r[:, 6] != r[:, 2])
        source[elsewhere] = chunk_pos(r[elsewhere, 6])
        m = columns.mentions
        chunk = chunk_pos(m[:, 0])
        order = sorted_by(chunk, m[:, 1])
        whole = not ((described < 0).any() or (source[r[:, 7] == 0] < 0).any())
        order = order[chunk[order] >= 0]
        return cls(
            chunk_rows,
            Entities(columns.entities, columns.entity_nodes, columns.literal),
            (keys[description_order], described[description_order], description_nodes),
            (r, own[relation_order], np.where(r[:, 7] == 1, -1, source)),
            (m[order], chunk[order], columns.weights[order]),
            node_ids,
            whole and len(order) == len(m),
        )

    def pages(self) -> npt.NDArray[np.int64]:
        """Each chunk's page entity (-1: none): :func:`~quillian.components.retrieval.
        derived.chunk_pages` of the snapshot, found among the mentions (a chunk's edges
        to its entities, in the same order), not among every edge."""
        out = np.full(self.n_chunks, -1, np.int64)
        topic = np.flatnonzero(self.mention_weight >= TOPIC_WEIGHT)[::-1]
        out[self.mention_chunk[topic]] = self.mention_entity[topic]  # the first link wins
        return out

    def arrays(self, pages: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[Any]]:
        """What :func:`~quillian.index.tables.save_tables` derives and stores beside the
        tables, by file name (an entity's chunks counted from its mentions: one
        entity-to-chunk edge each)."""
        return {
            "relation_subject": self.relation_subject.astype(np.int32),
            "relation_object": self.relation_object.astype(np.int32),
            "page_entities": pages,
            "description_entity": self.description_entity.astype(np.int32),
            "literal_entities": self.literal,
            "entity_chunks": np.bincount(self.mention_entity, minlength=self.n_entities),
            **derived.relation_hops(
                self.relation_subject,
                self.relation_object,
                self.n_entities,
                self.n_chunks,
                pages,
                self.relation_chunk,
            ),
            **self.orders,
        }

    @property
    def shape(self) -> GraphShape:
        return GraphShape(self.n_entities, len(self.description_entity), self.n_chunks)

    def edges(self, rows: npt.NDArray[np.bool_] | None = None) -> GraphEdges:
        """The graph's edges (``rows``: only those leaving the nodes where it is True)."""
        return graph_edges(
            self.shape,
            self.mention_chunk,
            self.mention_entity,
            self.mention_weight,
            self.description_entity,
            self.relation_subject,
            self.relation_object,
            rows,
        )

    # ----- carried --------------------------------------------------------------------

    def carried(
        self,
        entities: Entities,
        changed: Changed,
        chunk_ids: Sequence[str],
        chunk_rows: npt.NDArray[np.int64],
        chunk_moves: npt.NDArray[np.int64] | None,
    ) -> tuple[GraphPositions, _NodeMoves] | None:
        """These positions after a patch that wrote ``changed`` again and left the
        ``entities`` (in index order), for the build's chunks ``chunk_ids`` (keys
        ``chunk_rows``); ``chunk_moves``: each of this graph's chunks' new position
        (-1: gone), or None to look them up. Equal to :meth:`read` of the columns the
        patch leaves (the rows kept and those written); with them, how the nodes and
        relations moved (for the snapshot). None where these positions are not whole,
        or a row kept would have no chunk."""
        if not self.whole:
            return None
        chunk_pos, new = _ChunkPositions(chunk_rows), changed.rows
        moves = _chunk_moves(self.chunk_rows, chunk_rows, chunk_pos, chunk_moves)
        if moves is None:
            return None
        # the relations and mentions merged in a thread of their own while this one
        # merges the descriptions and carries the node ids: two cores, one update
        # (each merge copies every row it keeps; numpy lets go of the GIL as it does)
        others = in_thread(
            self._merged_relations, changed, chunk_pos, moves, name="merge relations"
        )
        descriptions = _merged(
            self.descriptions,
            moves[self.description_chunk],
            ~np.isin(self.descriptions[:, 1], changed.chunks),
            new.descriptions,
            chunk_pos(new.descriptions[:, 1]),
            2,
            (self.description_nodes, new.description_nodes),
        )
        if descriptions is None:
            others.result()
            return None
        moved_entities = _entity_moves(self.entity_order, entities.rows, changed.entities)
        added_chunks = np.ones(len(chunk_rows), np.bool_)
        added_chunks[moves[moves >= 0]] = False
        added_at = np.flatnonzero(added_chunks)
        node_ids = self.node_ids.carried(
            (moved_entities.ids, descriptions.moved, moves),
            (
                (moved_entities.added, entities.nodes[moved_entities.added]),
                (descriptions.added, new.description_nodes[descriptions.order]),
                (added_at, ids_as_bytes([chunk_ids[i] for i in added_at.tolist()])),
            ),
        )
        if node_ids is None:  # ids of no stable form: their order sorted again
            node_ids = IdMap.from_bytes(entities.nodes, descriptions.extra, ids_as_bytes(chunk_ids))
        merged = others.result()
        if merged is None:
            return None
        relations, mentions = merged
        after = GraphPositions(
            chunk_rows,
            entities,
            (descriptions.rows, descriptions.chunk, descriptions.extra),
            (relations.rows, relations.chunk, relations.extra),
            (mentions.rows, mentions.chunk, mentions.extra),
            node_ids,
            True,
        )
        after.row_moves = (descriptions.moved, relations.moved)
        nodes = _NodeMoves(self, after, moved_entities, descriptions, moves, relations, mentions)
        return after, nodes

    def _merged_relations(
        self, changed: Changed, chunk_pos: _ChunkPositions, moves: npt.NDArray[np.int64]
    ) -> tuple[_Merged, _Merged] | None:
        """The relations and the mentions of :meth:`carried` (``moves``: each chunk's
        new position), merged; None where a row kept or written has no chunk."""
        new = changed.rows
        keep_r = ~np.isin(self.relations[:, 1], changed.triples)
        source = np.where(self.relation_chunk >= 0, moves[self.relation_chunk], -1)
        if (keep_r & (self.relation_chunk >= 0) & (source < 0)).any():
            return None
        r = new.relations
        own = chunk_pos(r[:, 2])
        new_source = own.copy()
        elsewhere = np.flatnonzero(r[:, 6] != r[:, 2])
        new_source[elsewhere] = chunk_pos(r[elsewhere, 6])
        if (new_source[r[:, 7] == 0] < 0).any():
            return None
        relations = _merged(
            self.relations,
            moves[self.relation_own],
            keep_r,
            r,
            own,
            3,
            (source, np.where(r[:, 7] == 1, -1, new_source)),
        )
        mentions = _merged(
            self.mentions,
            moves[self.mention_chunk],
            ~np.isin(self.mentions[:, 0], changed.chunks),
            new.mentions,
            chunk_pos(new.mentions[:, 0]),
            1,
            (self.mention_weights, new.weights),
        )
        if relations is None or mentions is None:
            return None
        return relations, mentions


@dataclass(frozen=True)
class _Merged:
    """Rows kept (their order carried) and rows written again merged by their chunk's
    position and their number in it: ``rows`` and ``chunk`` (positions) by new
    position, ``extra`` (a column carried beside them), the new position of each old
    row (``moved``, -1: gone), of each written row (``added``, in position order), and
    the written rows' order by position (``order``)."""

    rows: npt.NDArray[np.int64]
    chunk: npt.NDArray[np.int64]
    extra: npt.NDArray[Any]
    moved: npt.NDArray[np.int64]
    added: npt.NDArray[np.int64]
    order: npt.NDArray[np.intp]

    @property
    def gone(self) -> npt.NDArray[np.bool_]:
        return self.moved < 0


def _merged(
    old: npt.NDArray[np.int64],
    old_chunk: npt.NDArray[np.int64],
    keep: npt.NDArray[np.bool_],
    new: npt.NDArray[np.int64],
    new_chunk: npt.NDArray[np.int64],
    seq: int,
    extra: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None = None,
) -> _Merged | None:
    """The rows ``old`` (in order, their chunks' new positions ``old_chunk``) that
    ``keep`` keeps and the rows ``new`` (their chunks at ``new_chunk``) merged by chunk
    position and column ``seq``; None where a row has no chunk of the build."""
    gone = np.flatnonzero(~keep)
    kept_chunk = np.delete(old_chunk, gone)
    if (len(kept_chunk) and kept_chunk.min() < 0) or (len(new_chunk) and new_chunk.min() < 0):
        return None
    kept_rows = np.flatnonzero(keep)
    new_seq = new[:, seq]
    order = np.lexsort((new_seq, new_chunk))  # by chunk, then number: stable
    # each written row's place among the kept rows (ordered by chunk, then number):
    # the kept rows of its chunk found by a binary search, then those of a lower
    # number counted among them (a patch's few rows and their chunks' rows, where
    # packing every kept row's chunk and number into one key to search read them all)
    ordered_chunk, ordered_seq = new_chunk[order], new_seq[order]
    low = np.searchsorted(kept_chunk, ordered_chunk, "left")
    sizes = np.searchsorted(kept_chunk, ordered_chunk, "right") - low
    places = low
    if total := int(sizes.sum()):
        row = np.repeat(np.arange(len(order)), sizes)
        window = np.repeat(low - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)
        lower = old[kept_rows[window], seq] < ordered_seq[row]
        places = low + np.bincount(row[lower], minlength=len(order))
    moved = np.full(len(old), -1, np.int64)
    at = np.arange(len(kept_chunk), dtype=np.int64)
    moved[kept_rows] = at + np.searchsorted(places, at, "right") if len(places) else at
    # each written row goes before the old row kept at its place (or after the last)
    before = np.append(kept_rows, len(old))[places]
    return _Merged(
        _spliced(old, gone, before, new[order]),
        np.insert(kept_chunk, places, new_chunk[order]),
        np.empty(0) if extra is None else _spliced(extra[0], gone, before, extra[1][order]),
        moved,
        places + np.arange(len(places), dtype=np.int64),
        order,
    )


#: Above this many rows gone and put in, :func:`_spliced` takes numpy's two passes.
_SPLICES = 512


def _spliced(
    old: npt.NDArray[Any],
    gone: npt.NDArray[np.intp],
    before: npt.NDArray[np.intp],
    new: npt.NDArray[Any],
) -> npt.NDArray[Any]:
    """``old`` (by rows) without the rows ``gone`` (in order), with each row of ``new``
    put before the old row ``before`` names (in order; ``len(old)``: at the end), in
    the wider of their types (:func:`numpy.insert` would cut byte strings to
    ``old``'s width): the runs of old rows kept copied once each, where deleting and
    inserting would copy every row twice."""
    wide = np.promote_types(old.dtype, new.dtype)
    if len(gone) + len(before) > _SPLICES:
        kept = np.delete(old, gone, axis=0).astype(wide, copy=False)
        places = np.searchsorted(gone, before)  # rows gone before each one's old row
        return np.insert(kept, before - places, new.astype(wide, copy=False), axis=0)
    # rows of columns kept by column (see GraphPositions) stay so: each run copied is
    # one run of each column
    order: Literal["C", "F"] = "F" if old.ndim > 1 and old.flags.f_contiguous else "C"
    out = np.empty((len(old) - len(gone) + len(new), *old.shape[1:]), wide, order=order)
    # events in old row order: a row put in before row b, a row gone at g (put-ins
    # first where both name one row: the row put in goes before it)
    events = sorted(
        [(int(b), 0, j) for j, b in enumerate(before.tolist())]
        + [(int(g), 1, 0) for g in gone.tolist()]
    )
    src = dst = 0
    for row, kind, j in events:
        run = row - src
        out[dst : dst + run] = old[src:row]
        dst += run
        src = row
        if kind == 0:
            out[dst] = new[j]
            dst += 1
        else:
            src = row + 1
    out[dst:] = old[src:]
    return out


@dataclass(frozen=True)
class _EntityMoves:
    """Each old entity position's new one (``nodes``: every row still there; ``ids``:
    -1 also for the rows written again, whose ids are taken anew) and the new
    positions of the rows written again (``added``)."""

    nodes: npt.NDArray[np.int64]
    ids: npt.NDArray[np.int64]
    added: npt.NDArray[np.int64]


def _entity_moves(
    before: npt.NDArray[np.int64], after: npt.NDArray[np.int64], written: npt.NDArray[np.int64]
) -> _EntityMoves:
    top = max(int(before.max()) if len(before) else 0, int(after.max()) if len(after) else 0) + 1
    position = np.full(top, -1, np.int64)
    position[after] = np.arange(len(after), dtype=np.int64)
    nodes = position[before]
    ids = nodes.copy()
    ids[np.isin(before, written)] = -1
    now = position[written[written < top]]
    return _EntityMoves(nodes, ids, np.sort(now[now >= 0]))


def _chunk_moves(
    before: npt.NDArray[np.int64],
    after: npt.NDArray[np.int64],
    positions: _ChunkPositions,
    moves: npt.NDArray[np.int64] | None,
) -> npt.NDArray[np.int64] | None:
    """Each of ``before``'s chunks' position in ``after`` (-1: gone): ``moves`` where it
    carries the keys there, else looked up among ``positions`` (``after``'s); None
    where the kept chunks changed order."""
    if moves is None or len(moves) != len(before):
        moves = positions(before)
    else:
        kept = moves >= 0
        if not np.array_equal(after[moves[kept]], before[kept]):
            moves = positions(before)
    kept_at = moves[moves >= 0]
    if len(kept_at) > 1 and (np.diff(kept_at) <= 0).any():
        return None
    return moves


class _NodeMoves:
    """How a graph's nodes and relations moved in a patch, and which nodes' edges it
    changed: what :meth:`~quillian.stores.snapshot.GraphSnapshot.carried` takes."""

    def __init__(
        self,
        before: GraphPositions,
        after: GraphPositions,
        entities: _EntityMoves,
        descriptions: _Merged,
        chunks: npt.NDArray[np.int64],
        relations: _Merged,
        mentions: _Merged,
    ) -> None:
        shape = after.shape
        desc_base, chunk_base = shape.entities, shape.entities + shape.descriptions
        self.kinds = shape.kinds
        self.nodes = np.concatenate(
            [
                entities.nodes,
                np.where(descriptions.gone, -1, descriptions.moved + desc_base),
                np.where(chunks >= 0, chunks + chunk_base, -1),
            ]
        )
        self.relations = relations.moved
        rows = self.changed = np.zeros(len(after.node_ids), np.bool_)
        # the entities whose mentions, descriptions or relations came or went, the
        # entity rows written again, and the descriptions and chunks written again
        rows[entities.added] = True
        for ends in (
            before.mention_entity[mentions.gone],
            before.description_entity[descriptions.gone],
            before.relation_subject[relations.gone],
            before.relation_object[relations.gone],
        ):
            now = entities.nodes[ends]
            rows[now[now >= 0]] = True
        for ends in (
            after.mention_entity[mentions.added],
            after.description_entity[descriptions.added],
            after.relation_subject[relations.added],
            after.relation_object[relations.added],
            desc_base + descriptions.added,
            chunk_base + after.mention_chunk[mentions.added],
        ):
            rows[ends] = True
        gone_chunks = before.mention_chunk[mentions.gone]
        now = chunks[gone_chunks]
        rows[chunk_base + now[now >= 0]] = True


#: The last graph written from each resolution state (by its path), under the digest
#: of its tables, with its snapshot: what the next patch in this process carries.
KEPT: KeptInProcess[tuple[GraphPositions, GraphSnapshot]] = KeptInProcess()
