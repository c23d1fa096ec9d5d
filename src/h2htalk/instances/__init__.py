"""The instances stage: what a model under test is given for each reference (demo set, a file, or inputs
reconstructed from the released references and verified by vote)."""
