/* Linked statically: a program LD_PRELOAD cannot reach (rmsg-run warns about it). */
int main(void) {
  return 0;
}
