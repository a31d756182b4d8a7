"""What goes into the prompt besides the conversation: the system prompt and context files (system_prompt),
prompt templates (templates) and skills (skills)."""
