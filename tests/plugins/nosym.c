/* nosym.c — a shared object without the entry symbol. */
int hutch_not_the_entry(void);
int hutch_not_the_entry(void)
{
    return 42;
}
