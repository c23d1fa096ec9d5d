"""The paper's two discussion studies: the SAP safety ablation (Table 3) and instruction following (Figure 7)."""
