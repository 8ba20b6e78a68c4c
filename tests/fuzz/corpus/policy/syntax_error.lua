return { limits = { 
