"""trit.Tokenizer: encode/decode round trips, arrays without copies, errors."""
import numpy as np
import pytest

import trit

from conftest import make_text


@pytest.fixture(scope="module")
def bpe():
    return trit.Tokenizer.train_bpe(make_text(), 300)


def test_round_trip_bytes_and_text(bpe):
    text = "the queen sang to the sea. héllo \x00 wörld"
    ids = bpe.encode(text)
    assert ids.dtype == np.int32 and ids.ndim == 1 and 0 < ids.size < len(text.encode())
    assert bpe.decode(ids) == text
    raw = b"\xff\xfe invalid utf-8"
    assert bpe.decode_bytes(bpe.encode(raw)) == raw
    assert bpe.kind == "bpe" and bpe.vocab_size == len(bpe) == 300
    assert b"".join(bpe.token_bytes(i) for i in ids) == text.encode()


def test_encode_is_trits_buffer_and_decode_reads_in_place(bpe):
    ids = bpe.encode("the king rode by night")
    assert not ids.flags["OWNDATA"]  # a view of the buffer trit allocated
    view = ids[1:]
    del ids  # the view keeps the buffer alive
    assert bpe.decode(view) == bpe.decode(list(view))
    arr = np.asarray(bpe.encode("old songs"), dtype=np.int32)
    same, _ = trit._arrays.int32_in(arr)
    assert same is arr  # an int32 array is passed as is, not copied


def test_char_tokenizer_refuses_unknown_byte():
    tok = trit.Tokenizer.train_char("abc")
    assert list(tok.encode("cab")) == [2, 0, 1]
    with pytest.raises(trit.TritValueError, match="z"):
        tok.encode("abz")


def test_decode_refuses_bad_id(bpe):
    with pytest.raises(trit.TritError, match="300"):
        bpe.decode([1, 300])
    with pytest.raises(ValueError):
        bpe.decode(np.zeros((2, 2), dtype=np.int32))


def test_save_and_load(bpe, tmp_path):
    path = tmp_path / "tok.bin"
    bpe.save(path)
    back = trit.Tokenizer(path)
    text = make_text(50, seed=9)
    assert np.array_equal(back.encode(text), bpe.encode(text))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(trit.TritError):
        trit.Tokenizer(path)
