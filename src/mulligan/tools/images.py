"""Images for the model: a PNG, JPEG, GIF or WebP file as an image block, downscaled with Pillow.

In: a file's bytes (or its path). Out: `{"type": "image", "mime_type", "data"}` whose longest
side is at most `MAX_SIDE` pixels and whose bytes are at most `MAX_BYTES`, the sizes every
provider we speak accepts (Anthropic's recommended 1568 px, under its 5 MB; OpenAI and Gemini
take more). Never: an image the file does not hold -- a file whose bytes are not one of the
four formats is refused by name (`NotAnImage`), whatever its extension says. Pillow is imported
only when an image is actually read (startup does not pay for it).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

from mulligan.messages import ImageBlock, image_block

MAX_SIDE = 1568
MAX_BYTES = 3_700_000  # base64 of this stays under the 5 MB every provider allows
EXTENSIONS = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
              ".gif": "image/gif", ".webp": "image/webp"}
_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


class NotAnImage(ValueError):
    """Bytes that are not a PNG, JPEG, GIF or WebP image (or one Pillow cannot open)."""


def sniff(head: bytes) -> str | None:
    """The MIME type of an image from its first bytes, or None: the magic numbers of the four
    formats, so a file named .png that is not one is not sent as one."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def looks_like_image(path: str | Path) -> bool:
    """True when the name ends in one of the four formats' extensions (the content is checked
    when the file is read)."""
    return Path(path).suffix.lower() in EXTENSIONS


def image_from_bytes(raw: bytes, name: str = "image") -> tuple[ImageBlock, str]:
    """(the block, a one-line description: format, size, and the size it was scaled from).
    Raises NotAnImage naming `name`."""
    mime = sniff(raw[:16])
    if mime is None:
        raise NotAnImage(f"{name} is not a PNG, JPEG, GIF or WebP image")
    from PIL import Image  # imported here: only a run that reads an image pays for Pillow

    try:
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
            width, height = image.size
            data, out_mime, size = _fit(image, raw, mime)
    except (OSError, Image.DecompressionBombError, SyntaxError, ValueError) as exc:
        raise NotAnImage(f"{name}: cannot read the image: {exc}") from None
    description = f"{name}: {out_mime}, {width}x{height}"
    if size != (width, height):
        description += f", scaled to {size[0]}x{size[1]}"
    return image_block(out_mime, base64.b64encode(data).decode("ascii")), description


def image_from_file(path: str | Path) -> tuple[ImageBlock, str]:
    """`image_from_bytes` of a file (OSError when it cannot be read)."""
    return image_from_bytes(Path(path).read_bytes(), str(path))


def _fit(image: object, raw: bytes, mime: str) -> tuple[bytes, str, tuple[int, int]]:
    """The image's bytes as they are when already within the limits, else scaled down (and,
    if still too big, re-encoded as JPEG)."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    width, height = image.size
    if max(width, height) <= MAX_SIDE and len(raw) <= MAX_BYTES:
        return raw, mime, (width, height)
    scale = min(1.0, MAX_SIDE / max(width, height))
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    frame = image.convert("RGBA" if image.mode in ("RGBA", "LA", "P") else "RGB")
    frame = frame.resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    if mime == "image/jpeg":
        frame.convert("RGB").save(out, "JPEG", quality=85)
    else:  # PNG, GIF (its first frame) and WebP become PNG: lossless, read everywhere
        frame.save(out, "PNG", optimize=True)
        mime = "image/png"
    data = out.getvalue()
    if len(data) > MAX_BYTES:
        out = io.BytesIO()
        frame.convert("RGB").save(out, "JPEG", quality=80)
        data, mime = out.getvalue(), "image/jpeg"
    return data, mime, size
