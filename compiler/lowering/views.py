"""Pure-Python view arithmetic (size, stride, storage offset) with torch's semantics.

Lowering computes the layout of every view op here instead of running the op on a meta tensor: during
compilation a FakeTensorMode is active, and dispatching through it costs milliseconds per op.
"""

from __future__ import annotations

import math


class ViewError(RuntimeError):
    pass


def _contig(size):
    st, acc = [], 1
    for s in reversed(size):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def _infer(shape, numel):
    shape = list(shape)
    if -1 in shape:
        i = shape.index(-1)
        rest = math.prod(s for j, s in enumerate(shape) if j != i)
        shape[i] = numel // rest if rest else 0
    return tuple(int(s) for s in shape)


def compute_stride(oldshape, oldstride, newshape):
    """ATen's computeStride: strides of ``newshape`` viewing (oldshape, oldstride), or None."""
    numel = math.prod(oldshape)
    if numel == 0:
        return _contig(newshape) if tuple(oldshape) != tuple(newshape) else tuple(oldstride)
    if len(oldshape) == 0:
        return (1,) * len(newshape)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


class Strided:
    """Just enough of the tensor view API, on (size, stride, offset)."""

    def __init__(self, size, stride, offset=0):
        self.size_ = tuple(int(s) for s in size)
        self.stride_ = tuple(int(s) for s in stride)
        self.offset = int(offset)

    # accessors used by lowering
    @property
    def shape(self):
        return self.size_

    def stride(self):
        return self.stride_

    def storage_offset(self):
        return self.offset

    def _dim(self, d, n=None):
        n = len(self.size_) if n is None else n
        return d % n if n else 0

    def view(self, shape):
        if isinstance(shape, int):
            shape = (shape,)
        shape = _infer(shape, math.prod(self.size_))
        st = compute_stride(self.size_, self.stride_, shape)
        if st is None:
            raise ViewError("view size is not compatible with input tensor's size and stride")
        return Strided(shape, st, self.offset)

    reshape = view

    def permute(self, dims):
        dims = [self._dim(d) for d in dims]
        return Strided([self.size_[d] for d in dims], [self.stride_[d] for d in dims], self.offset)

    def transpose(self, a, b):
        a, b = self._dim(a), self._dim(b)
        p = list(range(len(self.size_)))
        p[a], p[b] = p[b], p[a]
        return self.permute(p)

    def t(self):
        return self if len(self.size_) < 2 else self.transpose(0, 1)

    def expand(self, size):
        size = list(size)
        lead = len(size) - len(self.size_)
        out_s, out_st = [], []
        for i, s in enumerate(size):
            j = i - lead
            if j < 0:
                out_s.append(s)
                out_st.append(0)
                continue
            if s == -1:
                s = self.size_[j]
            if self.size_[j] == s:
                out_s.append(s)
                out_st.append(self.stride_[j])
            elif self.size_[j] == 1:
                out_s.append(s)
                out_st.append(0)
            else:
                raise ViewError("expand: size mismatch")
        return Strided(out_s, out_st, self.offset)

    def unsqueeze(self, d):
        d = self._dim(d, len(self.size_) + 1)
        s, st = list(self.size_), list(self.stride_)
        new_st = s[d] * st[d] if d < len(s) else 1
        s.insert(d, 1)
        st.insert(d, new_st)
        return Strided(s, st, self.offset)

    def squeeze(self, *dims):
        if dims and isinstance(dims[0], (list, tuple)):
            dims = tuple(dims[0])
        n = len(self.size_)
        ds = {self._dim(d) for d in dims} if dims else set(range(n))
        keep = [i for i in range(n) if not (i in ds and self.size_[i] == 1)]
        return Strided([self.size_[i] for i in keep], [self.stride_[i] for i in keep], self.offset)

    def select(self, d, i):
        d = self._dim(d)
        i = i + self.size_[d] if i < 0 else i
        s, st = list(self.size_), list(self.stride_)
        off = self.offset + i * st[d]
        del s[d]
        del st[d]
        return Strided(s, st, off)

    def slice(self, d=0, start=None, end=None, step=1):
        d = self._dim(d)
        n = self.size_[d]
        start = 0 if start is None else start
        end = n if end is None else end
        if start < 0:
            start += n
        if end < 0:
            end += n
        start = min(max(start, 0), n)
        end = min(max(end, start), n)
        length = (end - start + step - 1) // step
        s, st = list(self.size_), list(self.stride_)
        off = self.offset + start * st[d]
        s[d] = length
        st[d] = st[d] * step
        return Strided(s, st, off)

    def as_strided(self, size, stride, storage_offset=None):
        return Strided(size, stride, self.offset if storage_offset is None else storage_offset)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        d1, d2 = self._dim(dim1), self._dim(dim2)
        off = self.offset
        if offset >= 0:
            n = max(min(self.size_[d1], self.size_[d2] - offset), 0)
            off += offset * self.stride_[d2]
        else:
            n = max(min(self.size_[d1] + offset, self.size_[d2]), 0)
            off -= offset * self.stride_[d1]
        keep = [i for i in range(len(self.size_)) if i not in (d1, d2)]
        return Strided([self.size_[i] for i in keep] + [n],
                       [self.stride_[i] for i in keep] + [self.stride_[d1] + self.stride_[d2]], off)

    def unfold(self, d, size, step):
        d = self._dim(d)
        s, st = list(self.size_), list(self.stride_)
        n = (s[d] - size) // step + 1
        s[d] = n
        new_st = st[d] * step
        s.append(size)
        st.append(st[d])
        st[d] = new_st
        return Strided(s, st, self.offset)
