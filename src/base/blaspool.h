/*
 * blaspool: keeps OpenBLAS's thread pool off the cores tbisect's own
 * threads work on.
 */
#ifndef TB_BLASPOOL_H
#define TB_BLASPOOL_H

/* Stop the BLAS library's idle threads, once per process.  Call it before
 * starting threads of one's own or dropping pages (each drop interrupts
 * every core the process runs on), while no BLAS call can be running
 * (trees open, and the compare and the sketch start, before any
 * diagnosis); the library starts its pool again at its next call.  Does
 * nothing with a BLAS that has no such pool. */
void tb_blas_pool_stop(void);

#endif
