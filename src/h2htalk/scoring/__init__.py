"""The metric engine: BLEU-1..4, ROUGE-1/L, embedding similarity (SS) and S, as the paper defines them."""
