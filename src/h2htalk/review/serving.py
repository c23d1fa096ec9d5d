"""Whether the desk may serve where it is asked to: raters' tokens and cookies never cross a network in clear.

On a loopback address the desk serves plain HTTP (nothing leaves the machine). Anywhere else it needs one of: a
certificate of its own (``--certfile``/``--keyfile``, uvicorn's TLS), a TLS proxy or an SSH tunnel on this
machine that forwards to it on a loopback address (``--public-url``: where raters reach it), or an explicit
``--insecure-http``, which every page then warns of. docs/review_desk.md gives each with its commands.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from h2htalk.errors import H2HTalkError
from h2htalk.review.hosts import EVERY_ADDRESS, is_loopback

# asyncio reads a TLS connection 256 KB at a time, into a buffer of that size each connection holds from its
# handshake on: a hundred posts at once from nobody logged in, each refused from its headers, took the desk from 45 to
# about 125 MB, and what was freed stayed with the allocator. A TLS record holds at most 16 KB, so reading that much
# at a time costs the desk's forms (2 MB at most) nothing a rater would notice (docs/review_desk.md, "Load").
TLS_READ_BYTES = 16 * 1024

INSECURE_WARNING = (
    "This desk is served without encryption (--insecure-http): anyone on the network between you and it can read "
    "your token and your session, and rate as you."
)


def refusal_text(host: str, port: int) -> str:
    """Why the desk does not serve plain HTTP on ``host``, and the three ways to serve it there."""
    where = "this-machine" if host in EVERY_ADDRESS else f"[{host}]" if ":" in host else host
    return f"""--host {host} is not a loopback address: over plain HTTP, raters' tokens and cookies would cross \
the network in clear, and anyone on the path could rate as them. Serve it one of these ways (docs/review_desk.md, \
"On a network"):
  - with a certificate:  h2htalk desk-serve --host {host} --port {port} --certfile desk.crt --keyfile desk.key
      raters open https://{where}:{port}/ (a name or address the certificate names)
  - behind a TLS proxy on this machine that forwards to 127.0.0.2:{port}:
      h2htalk desk-serve --host 127.0.0.2 --port {port} --public-url https://desk.example.org
  - through SSH tunnels:  h2htalk desk-serve --host 127.0.0.2 --port {port} --public-url http://localhost:{port}
      each rater runs  ssh -N -L {port}:127.0.0.2:{port} rater@this-machine  and opens http://localhost:{port}/
  - or, knowing that anyone on the path can read every token: --insecure-http (every page then says so)"""


def check_serving(
    host: str, port: int, certfile: Path | None, keyfile: Path | None, public_url: str | None, insecure: bool
) -> None:
    """Raise H2HTalkError, before anything is served, where the options would put tokens on a network in clear or
    do not fit together."""
    if (certfile is None) != (keyfile is None):
        raise H2HTalkError("--certfile and --keyfile go together: the certificate and its private key")
    for option, path in (("--certfile", certfile), ("--keyfile", keyfile)):
        if path is not None and not path.is_file():
            raise H2HTalkError(f"{option} {path}: no such file")
    if public_url is not None:
        public = urlsplit(public_url)
        if public.scheme not in ("http", "https") or not public.hostname or public.path not in ("", "/"):
            raise H2HTalkError(
                f"--public-url {public_url}: give the scheme and host raters open, e.g. https://desk.example.org"
            )
        if not is_loopback(host):
            raise H2HTalkError(
                f"--public-url: the proxy or tunnel forwards to the desk on this machine: give --host a loopback "
                f"address (127.0.0.2), not {host}"
            )
        if certfile is not None:
            raise H2HTalkError("--public-url and --certfile: the proxy or the desk serves TLS, not both")
        if public.scheme == "http" and not is_loopback(public.hostname) and not insecure:
            raise H2HTalkError(
                f"--public-url {public_url}: raters would reach the desk over plain HTTP on a network; give an "
                "https URL (a TLS proxy) or a localhost one (an SSH tunnel)"
            )
    if certfile is None and public_url is None and not is_loopback(host) and not insecure:
        raise H2HTalkError(refusal_text(host, port))


def read_tls_in_records() -> None:
    """Have this process's event loop read TLS connections TLS_READ_BYTES at a time: the size asyncio's TLS
    protocol reads with is a class attribute of it (Python 3.11 on), and desk-serve is a process of its own."""
    from asyncio import sslproto

    sslproto.SSLProtocol.max_size = TLS_READ_BYTES
