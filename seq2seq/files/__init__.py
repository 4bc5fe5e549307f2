"""Files read and written safely: ``atomic`` (write, then rename), ``text_lines`` (lines
read strictly, errors naming the line), ``arriving_lines`` (stdin as it arrives)."""
