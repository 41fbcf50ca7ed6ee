"""LLVM intrinsics for the compiled kernels (numba), where a kernel needs what Python has no word for.

``prefetch(arr, i)`` asks the processor to start loading the cache line of ``arr[i]`` (the first
element of row ``i`` of a 2-d array) while the kernel works on something else. It changes no
result: a kernel that reads rows in an order no hardware prefetcher can guess (the LSH filter's
older holders' signature rows, ``row_kernels.band_agreement_hits``) names the one it will read a
few steps later.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, i):
    """Hint the processor to load ``arr[i]``'s cache line (for row ``i``: its first element) for
    reading, to be kept in every cache level (LLVM's ``prefetch``; a no-op where unsupported)."""
    sig = types.void(arr, i)

    def codegen(context, builder, signature, args):
        aryty, ity = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        at = [context.cast(builder, args[1], ity, types.intp)] + [context.get_constant(types.intp, 0)] * (aryty.ndim - 1)
        ptr = cgutils.get_item_pointer2(context, builder, data=ary.data, shape=cgutils.unpack_tuple(builder, ary.shape),
                                        strides=cgutils.unpack_tuple(builder, ary.strides), layout=aryty.layout,
                                        inds=at, wraparound=False, boundscheck=False)
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, byte_ptr), i32(0), i32(3), i32(1)])  # read, all cache levels, data
        return context.get_dummy_value()

    return sig, codegen
