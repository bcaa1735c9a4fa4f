/* Random123's known-answer vectors for philox4x32-10 (Salmon et al.,
 * SC'11): counter, key, the four output words. Shared by the CPU and the
 * CUDA host checks of the generator. */
#ifndef TESTS_SUPPORT_PHILOX_KAT_H
#define TESTS_SUPPORT_PHILOX_KAT_H

#include <stdint.h>

typedef struct philox_kat { uint32_t ctr[4], key[2], out[4]; } philox_kat;

static const philox_kat philox_kats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};
enum { PHILOX_NKATS = sizeof philox_kats / sizeof philox_kats[0] };

#endif
