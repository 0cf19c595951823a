"""`kubemu chaos`'s verdicts: pure checkers over what a run recorded.

    history          what clients did: invoke / ok / fail / info events, paired into Operations;
                     Changes, the store's own record of what happened at each revision
    linearizability  is the client history of each key explained by one atomic register?
    watchcheck       did a watch deliver every change once, in order, with no gap?
    acked            is every acknowledged write still there (or superseded), at its revision?
    storeops         the register operations as store requests, the store's answers as outcomes
    storefaults      the store faults as the store's own `fault` requests; when it is whole again
    nemesis          the seeded fault schedule

Nothing above does I/O or reads a clock of its own: the runner (`run`) records, these judge;
`plot` writes `--plot`'s files from pure rows.
"""
