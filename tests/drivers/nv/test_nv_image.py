import pytest

from drivers.nv import image

ELF = b"\x7fELF" + bytes(60)


def test_image_round_trip_keeps_cubin_and_ptx():
  ptx = ".version 8.5\n.target sm_90\n"
  assert image.unpack(image.pack(ELF, ptx)) == (ELF, ptx)


@pytest.mark.parametrize("bad, why", [(b"", "no HCQNVIMG header"), (ELF, "no HCQNVIMG header")])
def test_image_refuses_what_is_not_an_image(bad, why):
  with pytest.raises(ValueError, match=why): image.unpack(bad)


def test_image_refuses_truncation_and_non_elf():
  img = image.pack(ELF, "x")
  with pytest.raises(ValueError, match="truncated"): image.unpack(img[:-1])
  with pytest.raises(ValueError, match="not an ELF"): image.pack(b"PTX", "x")
