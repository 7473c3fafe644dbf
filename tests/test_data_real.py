"""Real-dataset readers on tiny files in the exact published formats, the dataset registry's
real path (cache, download, offline error), and the resumable downloader against a local
HTTP server on 127.0.0.1 (no outside host is ever contacted)."""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from cdfgnn.data import datasets, download as dl, real
from cdfgnn.data.graph import Graph
from cdfgnn.errors import CdfgnnError, CorruptFileError, DatasetUnavailableError

_spec = importlib.util.spec_from_file_location(
    "cdfgnn_test_fixtures", Path(__file__).parent / "fixtures" / "make_fixtures.py")
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


def edge_set(g: Graph) -> set[tuple[int, int]]:
    s, d = g.undirected_edges()
    return set(zip(s.tolist(), d.tolist()))


def masks_from(n, ids):
    m = np.zeros(n, dtype=bool)
    m[ids] = True
    return m


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


# ----------------------------------------------------------------------------- reddit
def test_reddit_loader_reads_dgl_npz_pair(tmp_path):
    truth = fx.write_reddit(tmp_path)
    g = real.load_reddit(tmp_path)
    assert g.num_nodes == truth["n"]
    np.testing.assert_array_equal(g.x, truth["x"])
    np.testing.assert_array_equal(g.y, truth["y"])
    np.testing.assert_array_equal(g.train, truth["types"] == 1)
    np.testing.assert_array_equal(g.val, truth["types"] == 2)
    np.testing.assert_array_equal(g.test, truth["types"] == 3)
    assert edge_set(g) == truth["edges"]  # symmetrised, deduplicated, self-loop dropped
    g.validate()


@pytest.mark.parametrize("damage, file", [
    ("truncate_graph", "reddit_graph.npz"),
    ("truncate_data", "reddit_data.npz"),
    ("short_labels", "reddit_data.npz"),
    ("bad_types", "reddit_data.npz"),
    ("missing_graph", "reddit_graph.npz"),
    ("wrong_shape", "reddit_graph.npz"),
])
def test_reddit_loader_names_the_bad_file(tmp_path, damage, file):
    import scipy.sparse as sp
    truth = fx.write_reddit(tmp_path)
    if damage == "truncate_graph":
        truncate(tmp_path / "reddit_graph.npz")
    elif damage == "truncate_data":
        truncate(tmp_path / "reddit_data.npz")
    elif damage in ("short_labels", "bad_types"):
        with np.load(tmp_path / "reddit_data.npz") as z:
            d = {k: z[k] for k in z.files}
        if damage == "short_labels":
            d["label"] = d["label"][:-1]
        else:
            d["node_types"][0] = 7
        np.savez(tmp_path / "reddit_data.npz", **d)
    elif damage == "missing_graph":
        (tmp_path / "reddit_graph.npz").unlink()
    else:
        sp.save_npz(tmp_path / "reddit_graph.npz", sp.coo_matrix((truth["n"] + 1, truth["n"] + 1)))
    with pytest.raises(CorruptFileError, match=file):
        real.load_reddit(tmp_path)


# --------------------------------------------------------------------------------- OGB
def test_ogb_csv_loader_reads_raw_and_split(tmp_path):
    ddir = tmp_path / "ogbn_arxiv"
    truth = fx.write_ogb_csv(ddir, "time")
    g = real.load_ogb_nodeprop(ddir, "ogbn-arxiv")
    assert g.num_nodes == truth["n"] and g.name == "ogbn-arxiv"
    np.testing.assert_allclose(g.x, truth["x"], atol=1e-6)
    np.testing.assert_array_equal(g.y, truth["y"])
    for mask, ids in zip((g.train, g.val, g.test), truth["split"]):
        np.testing.assert_array_equal(mask, masks_from(truth["n"], ids))
    assert edge_set(g) == truth["edges"]


def test_ogb_products_uses_its_split_name(tmp_path):
    ddir = tmp_path / "ogbn_products"
    truth = fx.write_ogb_csv(ddir, "sales_ranking")
    g = real.load_ogb_nodeprop(ddir, "ogbn-products")
    assert int(g.train.sum()) == len(truth["split"][0])
    with pytest.raises(CorruptFileError, match="time"):  # asking for another split names its path
        real.load_ogb_nodeprop(ddir, "ogbn-products", split="time")


def _rewrite(path: Path, rows, fmt="{}"):
    fx.write_csv_gz(path, rows, fmt)


@pytest.mark.parametrize("damage, file, words", [
    ("truncated_edges", "edge.csv.gz", "cannot read"),
    ("three_columns", "edge.csv.gz", "2 column"),
    ("ragged_edges", "edge.csv.gz", "cannot read"),
    ("edge_out_of_range", "edge.csv.gz", "outside"),
    ("label_count", "node-label.csv.gz", "labels"),
    ("node_count", "num-node-list.csv.gz", "nodes"),
    ("edge_count", "num-edge-list.csv.gz", "edges"),
    ("truncated_feat", "node-feat.csv.gz", "cannot read"),
    ("split_overlap", "split", "overlap"),
    ("split_out_of_range", "test.csv.gz", "outside"),
    ("not_gzip", "train.csv.gz", "cannot read"),
])
def test_ogb_loader_names_the_bad_file(tmp_path, damage, file, words):
    ddir = tmp_path / "ogbn_arxiv"
    truth = fx.write_ogb_csv(ddir, "time")
    raw, split = ddir / "raw", ddir / "split" / "time"
    n = truth["n"]
    if damage == "truncated_edges":
        truncate(raw / "edge.csv.gz", 0.6)
    elif damage == "three_columns":
        _rewrite(raw / "edge.csv.gz", [[0, 1, 2], [1, 2, 3]])
    elif damage == "ragged_edges":
        with gzip.open(raw / "edge.csv.gz", "wt") as f:
            f.write("0,1\n1,2\n2,3,4\n3\n")
    elif damage == "edge_out_of_range":
        _rewrite(raw / "edge.csv.gz", [[0, 1], [2, n]])
        _rewrite(raw / "num-edge-list.csv.gz", [[2]])
    elif damage == "label_count":
        _rewrite(raw / "node-label.csv.gz", truth["y"][:-1, None])
    elif damage == "node_count":
        _rewrite(raw / "num-node-list.csv.gz", [[n + 5]])
    elif damage == "edge_count":
        _rewrite(raw / "num-edge-list.csv.gz", [[7]])
    elif damage == "truncated_feat":
        truncate(raw / "node-feat.csv.gz", 0.5)
    elif damage == "split_overlap":
        _rewrite(split / "valid.csv.gz", np.concatenate([truth["split"][1], truth["split"][0][:1]])[:, None])
    elif damage == "split_out_of_range":
        _rewrite(split / "test.csv.gz", np.array([[n + 3]]))
    elif damage == "not_gzip":
        (split / "train.csv.gz").write_text("0\n1\n")
    with pytest.raises(CorruptFileError, match=file) as err:
        real.load_ogb_nodeprop(ddir, "ogbn-arxiv")
    assert words in str(err.value)


def test_ogb_binary_layout_with_unlabelled_nodes(tmp_path):
    ddir = tmp_path / "ogbn_papers100M"
    truth = fx.write_ogb_binary(ddir)
    g = real.load_ogb_nodeprop(ddir, "ogbn-papers100M")
    assert g.num_nodes == truth["n"]
    tr, va, te = truth["split"]
    np.testing.assert_array_equal(g.train, masks_from(truth["n"], tr))
    labelled = np.concatenate([tr, va, te])
    np.testing.assert_array_equal(g.y[labelled], truth["label"][labelled, 0].astype(np.int64))
    assert edge_set(g) == truth["edges"]
    # a split node without a label is refused, naming the label file
    lab = truth["label"].copy()
    lab[tr[0], 0] = np.nan
    np.savez(ddir / "raw" / "node-label.npz", node_label=lab)
    with pytest.raises(CorruptFileError, match="node-label.npz"):
        real.load_ogb_nodeprop(ddir, "ogbn-papers100M")


# --------------------------------------------------------------------------- GraphSAINT
@pytest.mark.parametrize("multilabel", [False, True])
def test_graphsaint_loader(tmp_path, multilabel):
    truth = fx.write_graphsaint(tmp_path, multilabel=multilabel)
    g = real.load_graphsaint(tmp_path, "yelp" if multilabel else "flickr")
    assert g.multilabel == multilabel
    np.testing.assert_array_equal(g.y, truth["y"])
    np.testing.assert_allclose(g.x, truth["x"])
    for mask, ids in zip((g.train, g.val, g.test), truth["split"]):
        np.testing.assert_array_equal(mask, masks_from(truth["n"], ids))
    assert edge_set(g) == truth["edges"]


def test_graphsaint_loader_names_bad_files(tmp_path):
    fx.write_graphsaint(tmp_path, multilabel=False)
    cmap = json.loads((tmp_path / "class_map.json").read_text())
    cmap.pop(next(iter(cmap)))
    (tmp_path / "class_map.json").write_text(json.dumps(cmap))
    with pytest.raises(CorruptFileError, match="class_map.json"):
        real.load_graphsaint(tmp_path, "flickr")
    fx.write_graphsaint(tmp_path, multilabel=False)
    (tmp_path / "role.json").write_text('{"tr": [0, 1], "va": [1]}')
    with pytest.raises(CorruptFileError, match="role.json"):
        real.load_graphsaint(tmp_path, "flickr")
    fx.write_graphsaint(tmp_path, multilabel=False)
    truncate(tmp_path / "feats.npy", 0.7)
    with pytest.raises(CorruptFileError, match="feats.npy"):
        real.load_graphsaint(tmp_path, "flickr")


def test_friendster_reads_snap_edge_list(tmp_path):
    truth = fx.write_friendster(tmp_path)
    g = real.load_friendster(tmp_path, seed=5)
    ids = truth["ids"]
    assert g.num_nodes == ids.size and g.num_features == 64
    s, d = g.undirected_edges()
    assert {(int(ids[a]), int(ids[b])) for a, b in zip(s, d)} == truth["edges"]
    assert g.y.max() < 32 and (g.train | g.val | g.test).all()
    np.testing.assert_array_equal(real.load_friendster(tmp_path, seed=5).x, g.x)


# ------------------------------------------------------------------- registry, real path
def test_get_graph_reads_raw_then_uses_the_cache(tmp_path):
    fx.write_reddit(tmp_path / "reddit" / "raw")
    g = datasets.get_graph("reddit", root=tmp_path)
    cache = tmp_path / "reddit" / datasets.CACHE_FILE
    assert cache.is_file()
    (tmp_path / "reddit" / "raw" / "reddit_graph.npz").write_bytes(b"garbage")  # cache must win
    g2 = datasets.get_graph("reddit", root=tmp_path)
    assert g2.fingerprint() == g.fingerprint()
    np.testing.assert_array_equal(g2.x, g.x)


def test_get_graph_ogb_layout_under_root(tmp_path):
    fx.write_ogb_csv(tmp_path / "ogbn_arxiv", "time")
    assert datasets.get_graph("ogbn-arxiv", root=tmp_path).name == "ogbn-arxiv"


def test_offline_reddit_names_the_twin(tmp_path, monkeypatch):
    calls = []

    def fail(url, dest, *a, **k):
        calls.append(url)
        raise dl.DownloadError(f"{url}: network unreachable (test)")
    monkeypatch.setattr(dl, "download", fail)
    with pytest.raises(DatasetUnavailableError, match="synth-reddit") as err:
        datasets.get_graph("reddit", root=tmp_path)
    assert "reddit" in str(err.value) and "could not be downloaded" in str(err.value)
    assert calls and "reddit.zip" in calls[0]
    with pytest.raises(DatasetUnavailableError, match="synth-arxiv"):
        datasets.get_graph("ogbn-arxiv", root=tmp_path)


def test_manual_sources_explain_where_files_go(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="synth-yelp") as err:
        datasets.get_graph("yelp", root=tmp_path)
    assert "Google Drive" in str(err.value) and str(tmp_path / "yelp" / "raw") in str(err.value)


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(CdfgnnError, match="synth-reddit"):
        datasets.get_graph("redit")
    assert {"reddit", "ogbn-arxiv", "synth-reddit"} <= set(datasets.list_datasets())
    assert all(n.startswith("synth-") for n in datasets.list_datasets("synthetic"))


# ---------------------------------------------------------------------------- download
class _Server:
    """Serves ``payload`` at /data.bin with Range support; modes inject failures."""

    def __init__(self, payload: bytes, mode: str = "ok"):
        self.payload, self.mode, self.requests = payload, mode, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.requests.append(dict(self.headers))
                if self.path != "/data.bin":
                    self.send_error(404)
                    return
                data, start = outer.payload, 0
                rng = self.headers.get("Range")
                if rng and outer.mode != "ignore_range":
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if outer.mode in ("drop_first", "ignore_range") and len(outer.requests) == 1:
                    # announce the full length, send half, hang up
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/data.bin"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


PAYLOAD = bytes(np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8))
SHA = hashlib.sha256(PAYLOAD).hexdigest()


def test_download_with_checksum(tmp_path):
    with _Server(PAYLOAD) as srv:
        out = dl.download(srv.url, tmp_path / "f.bin", SHA, backoff=0)
    assert out.read_bytes() == PAYLOAD
    assert not (tmp_path / "f.bin.part").exists()
    with _Server(PAYLOAD) as srv:  # present and verified: no request at all
        dl.download(srv.url, tmp_path / "f.bin", SHA, backoff=0)
        assert srv.requests == []


def test_download_resumes_after_a_dropped_connection(tmp_path):
    with _Server(PAYLOAD, "drop_first") as srv:
        out = dl.download(srv.url, tmp_path / "f.bin", SHA, retries=2, backoff=0, chunk_size=4096)
        assert len(srv.requests) == 2
        assert "Range" not in srv.requests[0]
        assert srv.requests[1]["Range"] == f"bytes={len(PAYLOAD) // 2}-"
    assert out.read_bytes() == PAYLOAD


def test_download_restarts_when_server_ignores_range(tmp_path):
    with _Server(PAYLOAD, "ignore_range") as srv:
        out = dl.download(srv.url, tmp_path / "f.bin", SHA, retries=1, backoff=0)
        assert len(srv.requests) == 2 and "Range" in srv.requests[1]
    assert out.read_bytes() == PAYLOAD


def test_download_continues_an_existing_part_file(tmp_path):
    (tmp_path / "f.bin.part").write_bytes(PAYLOAD[:1000])
    with _Server(PAYLOAD) as srv:
        dl.download(srv.url, tmp_path / "f.bin", SHA, backoff=0)
        assert srv.requests[0]["Range"] == "bytes=1000-"
    assert (tmp_path / "f.bin").read_bytes() == PAYLOAD
    (tmp_path / "g.bin.part").write_bytes(PAYLOAD)  # already complete: server answers 416
    with _Server(PAYLOAD) as srv:
        dl.download(srv.url, tmp_path / "g.bin", SHA, backoff=0)
    assert (tmp_path / "g.bin").read_bytes() == PAYLOAD


def test_download_checksum_mismatch_deletes_part(tmp_path):
    with _Server(PAYLOAD) as srv:
        with pytest.raises(CorruptFileError, match="sha256 mismatch"):
            dl.download(srv.url, tmp_path / "f.bin", "0" * 64, backoff=0)
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_download_does_not_retry_404_and_gives_up_on_dead_host(tmp_path, monkeypatch):
    with _Server(PAYLOAD) as srv:
        with pytest.raises(dl.DownloadError, match="404"):
            dl.download(srv.url.replace("data.bin", "nope"), tmp_path / "f.bin", retries=3, backoff=0)
        assert len(srv.requests) == 1
        dead = srv.url
    with pytest.raises(dl.DownloadError, match="3 attempt"):  # server closed: refused, retried
        dl.download(dead, tmp_path / "f.bin", retries=2, backoff=0, timeout=2)
    monkeypatch.setenv(dl.OFFLINE_ENV, "1")
    with pytest.raises(dl.DownloadError, match=dl.OFFLINE_ENV):
        dl.download(dead, tmp_path / "f.bin")


def test_extract_zip_refuses_bad_archives(tmp_path):
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("../escape.txt", "x")
    with pytest.raises(CorruptFileError, match="outside"):
        dl.extract_zip(evil, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CorruptFileError, match="bad.zip"):
        dl.extract_zip(bad, tmp_path / "out")


def _zip_dir(folder: Path, prefix: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, prefix + f.relative_to(folder).as_posix())
    return buf.getvalue()


@pytest.mark.parametrize("name", ["reddit", "ogbn-arxiv"])
def test_get_graph_downloads_and_unpacks_from_a_mirror(tmp_path, monkeypatch, name):
    """End to end: the release zip served locally -> fetched, unpacked, read, cached."""
    src_dir = tmp_path / "src"
    if name == "reddit":  # DGL's zip holds the two npz files at its top level
        truth = fx.write_reddit(src_dir)
        payload = _zip_dir(src_dir)
    else:  # OGB's zip holds one folder, arxiv/, with raw/ and split/ inside
        truth = fx.write_ogb_csv(src_dir, "time")
        payload = _zip_dir(src_dir, "arxiv/")
    with _Server(payload) as srv:
        old = dl.SOURCES[name]
        monkeypatch.setitem(dl.SOURCES, name, dl.Source(srv.url, old.archive, "zip", old.files,
                                                        subdir=old.subdir))
        g = datasets.get_graph(name, root=tmp_path / "data")
    assert edge_set(g) == truth["edges"] and g.num_nodes == truth["n"]
    ddir = datasets.dataset_dir(name, tmp_path / "data")
    assert (ddir / datasets.CACHE_FILE).is_file() and not (ddir / old.archive).exists()
    assert dl.missing_files(name, ddir) == []


def test_bad_archive_is_deleted_and_reported(tmp_path, monkeypatch):
    with _Server(b"this is not a zip file" * 100) as srv:
        monkeypatch.setitem(dl.SOURCES, "reddit",
                            dl.Source(srv.url, "reddit.zip", "zip", dl.SOURCES["reddit"].files))
        with pytest.raises(DatasetUnavailableError, match="reddit.zip.*synth-reddit"):
            datasets.get_graph("reddit", root=tmp_path)
    assert not (tmp_path / "reddit" / "reddit.zip").exists()
