# transform.py — rewrites a kernels/*.cu file for emu_kernel.h: the common header swapped for the
# emulation's, and every launch `k<<<grid, block, smem, stream>>>(args);` turned into
# `emu_launch(dim3(grid), dim3(block), [&]() { k(args); });`.
#     transform.py SRC.cu OUT.cpp [SAMPLE_THREADS]
# SAMPLE_THREADS replaces sample.cu's block size (1024) to make the emulation faster.
import re, sys
src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
s = s.replace('#include "kernels/common.cuh"', '#include "emu_kernel.h"\n#include "common_emu.cuh"')
def launch(m):
    name, cfg, args = m.group(1), m.group(2), m.group(3)
    parts = [p.strip() for p in cfg.split(',')]
    return 'emu_launch(dim3(%s), dim3(%s), [&]() { %s(%s); });' % (parts[0], parts[1], name, args)
s, n = re.subn(r'(\w+(?:<\w+>)?)<<<(.*?)>>>\((.*?)\);', launch, s, flags=re.S)
if 'sample' in src and len(sys.argv) > 3: s = s.replace('#define ST 1024', '#define ST ' + sys.argv[3])
if '<<<' in s:
    sys.exit('transform.py: %s: a launch the pattern does not match' % src)
open(dst, 'w').write(s)
print(src, n, 'launches')
