"""The baseline of benchmarks/ingest_replay.py: the least a server could do for an
ingest POST, on the same stack as a replica (Tornado, psycopg, msgspec).

It checks the token (its SHA-256 among the known ones, as a replica's cache does),
inflates and decodes the batch, and stores it exactly once in one statement: each
message as a JSON row keyed by (cluster_id, seq), duplicates ignored, the batch's
rows in one document read by json_to_recordset.  No contract check, no accounts,
no quotas, no encryption, no row tables: what a replica does beyond this is what the
benchmark's ratio prices.

    python benchmarks/_minimal_ingest.py --db postgresql://... --port 8999 --token-hash HEX
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib

import msgspec
import psycopg
from tornado import httpserver, web

SCHEMA = """
CREATE TABLE IF NOT EXISTS raw (
    cluster_id text NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    data jsonb NOT NULL,
    PRIMARY KEY (cluster_id, seq)
)
"""
INSERT = (
    "INSERT INTO raw (cluster_id, seq, kind, data) SELECT r.c, r.s, r.k, r.d "
    "FROM json_to_recordset(%s) AS r(c text, s int8, k text, d jsonb) ON CONFLICT DO NOTHING"
)


class Message(msgspec.Struct):
    cluster_id: str
    seq: int
    kind: str
    data: msgspec.Raw


class Row(msgspec.Struct):
    c: str
    s: int
    k: str
    d: msgspec.Raw


DECODE = msgspec.json.Decoder(list[Message]).decode
ENCODE = msgspec.json.Encoder().encode


class Ingest(web.RequestHandler):
    def initialize(self, conn: psycopg.Connection, tokens: frozenset[str]) -> None:
        self.conn, self.tokens = conn, tokens

    def post(self) -> None:
        scheme, _, token = self.request.headers.get("Authorization", "").partition(" ")
        if hashlib.sha256(token.strip().encode()).hexdigest() not in self.tokens:
            raise web.HTTPError(401)
        body = self.request.body
        if self.request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        batch = DECODE(body)
        doc = ENCODE([Row(m.cluster_id, m.seq, m.kind, m.data) for m in batch])
        with self.conn.cursor() as cur:
            cur.execute(INSERT, (doc.decode(),))
            stored = cur.rowcount
        self.write({"stored": stored, "received": len(batch)})


async def serve(db: str, port: int, tokens: frozenset[str]) -> None:
    conn = psycopg.connect(db, autocommit=True)  # one statement, one transaction
    conn.execute(SCHEMA)
    app = web.Application([(r"/api/ingest", Ingest, {"conn": conn, "tokens": tokens})])
    server = httpserver.HTTPServer(app, max_body_size=64 << 20)
    server.listen(port, "127.0.0.1")
    print(f"minimal ingest at http://127.0.0.1:{port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token-hash", action="append", required=True)
    args = ap.parse_args()
    asyncio.run(serve(args.db, args.port, frozenset(args.token_hash)))


if __name__ == "__main__":
    main()
